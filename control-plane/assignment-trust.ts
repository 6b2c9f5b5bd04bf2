/**
 * Which assignment tokens carry the control plane's signature, judged against its current key set
 * with the contract's verifyAssignment (the node agent's own check), so only verified assignments
 * hold capacity. Verification is asynchronous; the verdicts are cached by the token's digest, so
 * the cluster view judges a pod with a map lookup and a token is verified once however often its
 * pod changes. Tokens this replica signed itself are vouched for at once, so a fresh bind counts
 * before the verification of anyone else's token could finish.
 */
import { createHash } from 'node:crypto';
import type * as jose from 'jose';
import { Counter, type Registry } from 'prom-client';
import { type Assignment, AssignmentError, peekAssignment, verifyAssignment } from '../contract/index.js';
import type { TokenVerdict, UnverifiedReason } from './placement/holds/index.js';

/** A real assignment is a few KiB; anything far larger is refused unread. */
export const MAX_ASSIGNMENT_TOKEN_BYTES = 64 * 1024;

export type UnverifiedAssignment = {
  pod: { namespace: string; name: string; uid: string };
  reason: UnverifiedReason;
  message: string;
};

export type AssignmentTrustOptions = {
  /** The current key set; read on every verification, and a changed set drops every cached verdict. */
  jwks: () => jose.JSONWebKeySet;
  /** Verdicts kept (default 16,384); the cluster view keeps each live pod's own verdict besides. */
  maxEntries?: number;
  /** Called once per pod UID and token that holds nothing because it did not verify. */
  onUnverified?: (u: UnverifiedAssignment) => void;
};

/** A Map that forgets its least recently used entry past `max`. */
class LruMap<V> {
  private readonly map = new Map<string, V>();
  constructor(private readonly max: number) {}

  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v === undefined) return undefined;
    this.map.delete(key);
    this.map.set(key, v);
    return v;
  }

  set(key: string, v: V): void {
    this.map.delete(key);
    this.map.set(key, v);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as string);
  }

  clear(): void {
    this.map.clear();
  }
}

function digestOf(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

function refusal(reason: UnverifiedReason, message: string): TokenVerdict {
  return { ok: false, reason, message };
}

export class AssignmentTrust {
  private readonly verdicts: LruMap<TokenVerdict>;
  private readonly inFlight = new Map<string, Promise<TokenVerdict>>();
  /** pod UID + token digest of the refusals already reported. */
  private readonly reported: LruMap<true>;
  private verifiedWith: jose.JSONWebKeySet | undefined;
  private keyGeneration = 0;

  constructor(private readonly opts: AssignmentTrustOptions) {
    const max = opts.maxEntries ?? 16_384;
    this.verdicts = new LruMap(max);
    this.reported = new LruMap(max);
  }

  /** Changes whenever the key set does: a verdict remembered elsewhere holds only while it stays the same. */
  generation(): number {
    this.dropIfKeysChanged();
    return this.keyGeneration;
  }

  /** The verdict on a token's signature if known; undefined until verify() settled it. */
  lookup(token: string): TokenVerdict | undefined {
    this.dropIfKeysChanged();
    return this.verdicts.get(digestOf(token));
  }

  /** This replica signed `token` for `assignment`: it holds from now on, unverified by crypto. */
  vouch(token: string, assignment: Assignment): void {
    this.dropIfKeysChanged();
    this.verdicts.set(digestOf(token), { ok: true, assignment });
  }

  /** Verifies a token's signature (once per token, however many ask) and caches the verdict. */
  verify(token: string): Promise<TokenVerdict> {
    this.dropIfKeysChanged();
    const digest = digestOf(token);
    const known = this.verdicts.get(digest);
    if (known) return Promise.resolve(known);
    const running = this.inFlight.get(digest);
    if (running) return running;
    const keys = this.opts.jwks();
    const work = verdictOf(token, keys).then((v) => {
      this.inFlight.delete(digest);
      // A key set that changed meanwhile makes this verdict stale: the next lookup verifies again.
      if (keys === this.verifiedWith) this.verdicts.set(digest, v);
      return v;
    });
    this.inFlight.set(digest, work);
    return work;
  }

  /** Reports a refused assignment, once per pod UID and token. */
  report(u: UnverifiedAssignment, token: string): void {
    const key = `${u.pod.uid}|${digestOf(token)}`;
    if (this.reported.get(key)) return;
    this.reported.set(key, true);
    this.opts.onUnverified?.(u);
  }

  private dropIfKeysChanged(): void {
    const keys = this.opts.jwks();
    if (keys === this.verifiedWith) return;
    this.verifiedWith = keys;
    this.keyGeneration += 1;
    this.verdicts.clear();
  }
}

/**
 * The signature's verdict. The expiry is waived: a running pod keeps its cards long after its token
 * expired, as the node agent keeps honouring it when it relearns. Whether the token names the pod
 * that carries it is the caller's check (judgePodAssignment).
 */
async function verdictOf(token: string, jwks: jose.JSONWebKeySet): Promise<TokenVerdict> {
  if (token.length > MAX_ASSIGNMENT_TOKEN_BYTES) {
    return refusal('malformed', `the assignment is longer than ${MAX_ASSIGNMENT_TOKEN_BYTES} bytes`);
  }
  const claims = peekAssignment(token);
  if (!claims) return refusal('malformed', 'the assignment is not a vcuda assignment token');
  try {
    const verified = await verifyAssignment(token, jwks, {
      podUid: claims.pod.uid,
      node: claims.node,
      nowSeconds: Math.floor(Date.now() / 1000),
      ignoreExpiry: true,
    });
    const { issuedAt: _i, expiresAt: _e, kid: _k, ...assignment } = verified;
    return { ok: true, assignment };
  } catch (err) {
    if (err instanceof AssignmentError) return refusal(err.code, err.message);
    // Anything unexpected (a key that does not import) fails closed.
    return refusal('malformed', `the assignment could not be verified: ${(err as Error).message}`);
  }
}

/** Counts assignments that hold nothing because they did not verify, by reason. */
export function createAssignmentTrustMetrics(registry: Registry): { unverified: Counter<'reason'> } {
  return {
    unverified: new Counter({
      name: 'vcuda_unverified_assignments_total',
      help: 'Pods whose assignment annotation holds no capacity: unsigned, forged, or not matching the pod (by reason)',
      labelNames: ['reason'],
      registers: [registry],
    }),
  };
}
