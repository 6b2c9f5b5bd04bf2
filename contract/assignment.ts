/**
 * The signed assignment: the control plane's word, carried on the pod, that this pod's containers
 * get exactly these cards on this node. A compact JWS (EdDSA or ES256) with a `kid` header, verified
 * against a JWKS that may hold several keys so keys can rotate without a flag day.
 */
import * as jose from 'jose';
import { z } from 'zod';
import { VcudaError } from './errors.js';
import { migPlacementKey } from './mig-placement.js';
import { MIG_PROFILE_PATTERN, MIG_PROFILE_RULE } from './mig-resources.js';

export const ASSIGNMENT_VERSION = 1;
const ISSUER = 'vcuda-control-plane';
/** The `iss` of every assignment, for signers that reuse an imported key (control-plane/signing-keys.ts). */
export const ASSIGNMENT_ISSUER = ISSUER;

export const cardGrantSchema = z
  .object({
    uuid: z.string().min(1),
    /** Hundredths of this card, 1..100. */
    core: z.number().int().min(1).max(100),
    memoryBytes: z.number().int().positive(),
    /**
     * The pod's vcuda-memory-limit on this card, above memoryBytes: bytes between the two are served
     * as evictable managed memory. Absent: no burst (and every assignment signed before it existed).
     */
    memoryLimitBytes: z.number().int().positive().optional(),
    /**
     * A whole MIG instance: `uuid` is its `MIG-` UUID, `core` 100 and `memoryBytes` the instance's
     * memory; the parent card and where on its 8 memory slices the instance sits ride along. Absent:
     * a card (whole or a share of it). `dynamic`: the instance does not exist yet, the node agent
     * creates it at this placement, and `uuid` is the placement's key (`migPlacementKey`).
     * `sliceMemoryMiB` (dynamic only): the memory of each of its card's slices as the ledger
     * registers them, which the grant takes all of on every slice it covers (ledgerUseOfGrant).
     */
    mig: z
      .object({
        parent: z.string().min(1),
        profile: z.string().regex(MIG_PROFILE_PATTERN, MIG_PROFILE_RULE),
        start: z.number().int().min(0).max(7),
        size: z.number().int().min(1).max(8),
        dynamic: z.literal(true).optional(),
        sliceMemoryMiB: z.number().int().positive().optional(),
      })
      .optional(),
  })
  .refine((g) => !g.mig || g.mig.dynamic || (g.core === 100 && g.uuid.startsWith('MIG-')), {
    message: 'a MIG instance is granted whole (core 100), by its MIG- UUID',
  })
  .refine((g) => g.mig?.sliceMemoryMiB === undefined || g.mig.dynamic, {
    message: 'only a dynamic MIG instance carries sliceMemoryMiB',
  })
  .refine((g) => !g.mig?.dynamic || (g.core === 100 && g.uuid === migPlacementKey(g.mig)), {
    message: 'a dynamic MIG instance is granted whole (core 100), by its placement <parent>/<profile>@<start>',
  });

export const containerGrantSchema = z.object({
  name: z.string().min(1),
  isInit: z.boolean().default(false),
  cards: z.array(cardGrantSchema).min(1),
  coreLimit: z.number().int().min(1).max(100),
  mode: z.enum(['hard', 'soft']),
});

export const assignmentSchema = z.object({
  v: z.literal(ASSIGNMENT_VERSION),
  pod: z.object({ uid: z.string().min(1), namespace: z.string().min(1), name: z.string().min(1) }),
  node: z.string().min(1),
  cluster: z.string().min(1),
  containers: z.array(containerGrantSchema).min(1),
});

export type CardGrant = z.infer<typeof cardGrantSchema>;
export type ContainerGrant = z.infer<typeof containerGrantSchema>;
export type Assignment = z.infer<typeof assignmentSchema>;

/** A verified assignment with its issue and expiry times (unix seconds). */
export type VerifiedAssignment = Assignment & { issuedAt: number; expiresAt: number; kid: string };

export type AssignmentErrorCode =
  | 'malformed'
  | 'bad-signature'
  | 'unknown-kid'
  | 'wrong-pod'
  | 'wrong-node'
  | 'expired';

export class AssignmentError extends VcudaError<AssignmentErrorCode> {}

export type SigningAlgorithm = 'EdDSA' | 'ES256';

/** A private key able to sign, with its id; the public half goes into the JWKS. */
export type SigningKey = { kid: string; alg: SigningAlgorithm; privateJwk: jose.JWK; publicJwk: jose.JWK };

export async function generateSigningKey(kid: string, alg: SigningAlgorithm = 'EdDSA'): Promise<SigningKey> {
  const { privateKey, publicKey } = await jose.generateKeyPair(alg, { extractable: true });
  const privateJwk = { ...(await jose.exportJWK(privateKey)), kid, alg };
  const publicJwk = { ...(await jose.exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateJwk, publicJwk };
}

export function jwksOf(keys: readonly Pick<SigningKey, 'publicJwk'>[]): jose.JSONWebKeySet {
  return { keys: keys.map((k) => k.publicJwk) };
}

export async function signAssignment(
  assignment: Assignment,
  key: SigningKey,
  opts: { nowSeconds: number; ttlSeconds: number },
): Promise<string> {
  const parsed = assignmentSchema.parse(assignment);
  const privateKey = await jose.importJWK(key.privateJwk, key.alg);
  return new jose.SignJWT({ ...parsed })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'vcuda-assignment+jwt' })
    .setIssuer(ISSUER)
    .setSubject(parsed.pod.uid)
    .setIssuedAt(opts.nowSeconds)
    .setExpirationTime(opts.nowSeconds + opts.ttlSeconds)
    .sign(privateKey);
}

export type VerifyExpectation = {
  podUid: string;
  node: string;
  nowSeconds: number;
  /** Rebuilding state for pods already running: the signature still counts, the expiry no longer does. */
  ignoreExpiry?: boolean;
};

/**
 * Public keys as imported, by their algorithm and material (never by kid alone: a key rotated
 * under the same kid is another entry). Importing cost as much as the verification itself, and
 * every pod's assignment is verified with the same few keys.
 */
const importedKeys = new Map<string, ReturnType<typeof jose.importJWK>>();
const MAX_IMPORTED_KEYS = 32;

function importedPublicKey(jwk: jose.JWK, alg: string): ReturnType<typeof jose.importJWK> {
  const id = JSON.stringify([alg, jwk.kty, jwk.crv, jwk.x, jwk.y]);
  let key = importedKeys.get(id);
  if (!key) {
    if (importedKeys.size >= MAX_IMPORTED_KEYS) importedKeys.clear();
    key = jose.importJWK(jwk, alg);
    importedKeys.set(id, key);
    // A key that did not import is not kept: the next verification tries again and fails alike.
    key.catch(() => importedKeys.delete(id));
  }
  return key;
}

/** Verifies signature, key id, pod, node and expiry; each failure has its own code. */
export async function verifyAssignment(
  token: string,
  jwks: jose.JSONWebKeySet,
  expect: VerifyExpectation,
): Promise<VerifiedAssignment> {
  let header: jose.ProtectedHeaderParameters;
  try {
    header = jose.decodeProtectedHeader(token);
  } catch (cause) {
    throw new AssignmentError('malformed', 'assignment is not a compact JWS', { cause });
  }
  const kid = header.kid;
  if (!kid) throw new AssignmentError('malformed', 'assignment has no kid header');
  const jwk = jwks.keys.find((k) => k.kid === kid);
  if (!jwk) throw new AssignmentError('unknown-kid', `assignment signed with unknown key "${kid}"`);
  if (header.alg !== 'EdDSA' && header.alg !== 'ES256') {
    throw new AssignmentError('malformed', `assignment algorithm ${String(header.alg)} is not allowed`);
  }
  let payload: jose.JWTPayload;
  try {
    const publicKey = await importedPublicKey(jwk, header.alg);
    ({ payload } = await jose.jwtVerify(token, publicKey, {
      issuer: ISSUER,
      algorithms: [header.alg],
      currentDate: new Date(expect.nowSeconds * 1000),
      // Expiry is checked below so it can be waived for running pods and reported with its own code.
      clockTolerance: Number.MAX_SAFE_INTEGER,
    }));
  } catch (cause) {
    if (cause instanceof jose.errors.JWSSignatureVerificationFailed) {
      throw new AssignmentError('bad-signature', `assignment signature does not verify with key "${kid}"`, {
        cause,
      });
    }
    throw new AssignmentError('malformed', `assignment is malformed: ${(cause as Error).message}`, { cause });
  }
  const parsed = assignmentSchema.safeParse(payload);
  if (!parsed.success || typeof payload.iat !== 'number' || typeof payload.exp !== 'number') {
    throw new AssignmentError('malformed', 'assignment claims do not match the assignment schema');
  }
  const a = parsed.data;
  if (a.pod.uid !== expect.podUid || payload.sub !== expect.podUid) {
    throw new AssignmentError('wrong-pod', `assignment is for pod ${a.pod.uid}, not ${expect.podUid}`);
  }
  if (a.node !== expect.node) {
    throw new AssignmentError('wrong-node', `assignment is for node ${a.node}, not ${expect.node}`);
  }
  if (!expect.ignoreExpiry && payload.exp <= expect.nowSeconds) {
    throw new AssignmentError(
      'expired',
      `assignment expired ${expect.nowSeconds - payload.exp}s ago (at ${new Date(payload.exp * 1000).toISOString()})`,
    );
  }
  return { ...a, issuedAt: payload.iat, expiresAt: payload.exp, kid };
}

/** Reads the claims without verifying them: for display and matching only, never for granting. */
export function peekAssignment(token: string): Assignment | undefined {
  try {
    const parsed = assignmentSchema.safeParse(jose.decodeJwt(token));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
