/**
 * Who is calling: a bearer token checked with the Kubernetes API server (TokenReview), the way
 * in-cluster services authenticate each other without a secret of their own. Writes to the
 * ledger's usage table change what teams are charged, so only the node agents' service account
 * may make them. Answers are cached briefly so a report every few seconds per node costs the API
 * server one review per token per minute.
 */
import { createHash } from 'node:crypto';
import { getConnInfo } from '@hono/node-server/conninfo';
import { AuthenticationV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Context, MiddlewareHandler } from 'hono';
import { VcudaError } from '../../contract/index.js';
import { toVcudaError } from '../kube-client.js';

export type Caller = {
  username: string;
  groups: string[];
  /** TokenReview's `user.extra`: a token bound to a pod names it, and (Kubernetes >= 1.30) its node. */
  extra?: Readonly<Record<string, readonly string[]>>;
};

declare module 'hono' {
  /** What `requireCaller` leaves on the request for the handler: who was let in. */
  interface ContextVariableMap {
    caller?: Caller;
  }
}

/**
 * Resolves a bearer token to its caller; undefined when the token is not valid. `client` is the
 * address the request came from, for pacing the reviews it may cause.
 */
export type Authenticator = (token: string, client?: string) => Promise<Caller | undefined>;

export type AuthCacheOptions = {
  /** How long an accepted token is trusted without asking again. */
  acceptTtlMs?: number;
  /** How long a refused token is refused without asking again (the negative cache). */
  refuseTtlMs?: number;
  /** Answers kept at most, accepted and refused each: a flood of refusals never evicts a node agent. */
  maxEntries?: number;
  /** Reviews of tokens not in the cache, per client and in all (default: reviewPacing's). */
  pacing?: ReviewPacing;
  now?: () => number;
};

const MAX_TOKEN_CHARS = 16 * 1024;

/** A token bucket: `perSecond` refills, at most `burst` at once. */
type Bucket = { tokens: number; atMs: number };

export type ReviewPacingOptions = {
  /** Reviews one client address may cause per second, and in a burst (default 1 and 10). */
  perClientPerSecond?: number;
  perClientBurst?: number;
  /** Reviews all clients together may cause per second, and in a burst (default 20 and 50). */
  totalPerSecond?: number;
  totalBurst?: number;
  /** Client addresses remembered at most; the least recently seen are forgotten. */
  maxClients?: number;
};

/**
 * Every token the cache does not know costs a TokenReview, so a caller making up tokens would
 * make the API server work for each. Reviews are paced per client address and in all; a node
 * agent's rotated token needs one review an hour, far below either pace.
 */
export class ReviewPacing {
  private readonly clients = new Map<string, Bucket>();
  private readonly total: Bucket;
  private readonly o: Required<ReviewPacingOptions>;

  constructor(opts: ReviewPacingOptions = {}) {
    this.o = {
      perClientPerSecond: opts.perClientPerSecond ?? 1,
      perClientBurst: opts.perClientBurst ?? 10,
      totalPerSecond: opts.totalPerSecond ?? 20,
      totalBurst: opts.totalBurst ?? 50,
      maxClients: opts.maxClients ?? 4096,
    };
    this.total = { tokens: this.o.totalBurst, atMs: 0 };
  }

  /** Whether `client` may cause one more review now; takes it when it may. */
  tryTake(client: string, nowMs: number): boolean {
    const mine = this.clients.get(client) ?? { tokens: this.o.perClientBurst, atMs: nowMs };
    // Re-inserted at the end: the map's order is least recently seen first.
    this.clients.delete(client);
    this.clients.set(client, mine);
    if (this.clients.size > this.o.maxClients) this.clients.delete(this.clients.keys().next().value as string);
    refill(mine, nowMs, this.o.perClientPerSecond, this.o.perClientBurst);
    refill(this.total, nowMs, this.o.totalPerSecond, this.o.totalBurst);
    if (mine.tokens < 1 || this.total.tokens < 1) return false;
    mine.tokens--;
    this.total.tokens--;
    return true;
  }
}

function refill(b: Bucket, nowMs: number, perSecond: number, burst: number): void {
  b.tokens = Math.min(burst, b.tokens + (Math.max(0, nowMs - b.atMs) * perSecond) / 1000);
  b.atMs = nowMs;
}

/** A bounded map of answers that expire; the oldest entry goes first when full. */
class AnswerCache {
  private readonly entries = new Map<string, { caller: Caller | undefined; until: number }>();
  constructor(private readonly maxEntries: number) {}
  get(key: string, nowMs: number) {
    const hit = this.entries.get(key);
    if (hit && hit.until <= nowMs) this.entries.delete(key);
    return hit && hit.until > nowMs ? hit : undefined;
  }
  set(key: string, caller: Caller | undefined, until: number): void {
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(key, { caller, until });
  }
}

/** The TokenReview call itself (authentication.k8s.io/v1); `audiences` empty = the API server's own. */
export function tokenReview(kc: KubeConfig, audiences: string[] = []): Authenticator {
  const api = kc.makeApiClient(AuthenticationV1Api);
  return async (token) => {
    try {
      const review = await api.createTokenReview({
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, ...(audiences.length > 0 ? { audiences } : {}) },
        },
      });
      const status = review.status;
      if (!status?.authenticated || !status.user?.username) return undefined;
      const { username, groups, extra } = status.user;
      return { username, groups: groups ?? [], ...(extra ? { extra } : {}) };
    } catch (err) {
      throw toVcudaError(err, 'token review');
    }
  };
}

/**
 * Wraps a review with bounded caches keyed by the token's hash (tokens are never kept): accepted
 * and refused answers apart, and reviews of unknown tokens paced per client (503 past the pace).
 */
export function cachedAuthenticator(review: Authenticator, opts: AuthCacheOptions = {}): Authenticator {
  const acceptTtlMs = opts.acceptTtlMs ?? 60_000;
  const refuseTtlMs = opts.refuseTtlMs ?? 10_000;
  const accepted = new AnswerCache(opts.maxEntries ?? 1024);
  const refused = new AnswerCache(opts.maxEntries ?? 1024);
  const pacing = opts.pacing ?? new ReviewPacing();
  const now = opts.now ?? Date.now;
  return async (token, client = 'unknown') => {
    const key = createHash('sha256').update(token).digest('base64url');
    const hit = accepted.get(key, now()) ?? refused.get(key, now());
    if (hit) return hit.caller;
    if (!pacing.tryTake(client, now())) {
      throw new VcudaError('unavailable', `too many unknown tokens from ${client}; retry later`);
    }
    const caller = await review(token);
    (caller ? accepted : refused).set(key, caller, now() + (caller ? acceptTtlMs : refuseTtlMs));
    return caller;
  };
}

/** The address a request came from (node-server), or 'unknown' where there is no socket (tests). */
function clientOf(c: Context): string {
  try {
    return getConnInfo(c).remote.address ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * Lets a request through only when its bearer token belongs to one of `allowed` usernames.
 * 401: no token, or one the API server does not accept; 403: a valid caller not on the list;
 * 503: the API server could not be asked (fail closed).
 */
export function requireCaller(auth: Authenticator, allowed: readonly string[], what: string): MiddlewareHandler {
  const allowedSet = new Set(allowed);
  const who = allowed.join(', ');
  return async (c, next) => {
    const token = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1];
    if (!token) {
      throw new VcudaError(
        'unauthenticated',
        `${what} needs a service account token (Authorization: Bearer ...) of ${who}`,
      );
    }
    // A service account token is a JWT of a few KiB: a longer one is no token, and not worth a review.
    if (token.length > MAX_TOKEN_CHARS) {
      throw new VcudaError('unauthenticated', `${what}: the bearer token is longer than ${MAX_TOKEN_CHARS} characters`);
    }
    const caller = await auth(token, clientOf(c));
    if (!caller) throw new VcudaError('unauthenticated', `${what}: the API server did not accept the bearer token`);
    if (!allowedSet.has(caller.username)) {
      throw new VcudaError('forbidden', `${what}: ${caller.username} may not do this; allowed: ${who}`);
    }
    c.set('caller', caller);
    await next();
  };
}
