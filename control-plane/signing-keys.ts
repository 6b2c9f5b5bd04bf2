/**
 * The assignment signing keys every replica shares, and the public JWKS node agents verify with.
 *
 * Sources: `secret` (default in a cluster): the Secret `vcuda-signing-keys` in the control plane's
 * namespace holds `keys.json` (private JWKs, newest first, so keys rotate by prepending); the first
 * replica creates it when absent, and a replica that loses that race reads the winner's. `file`:
 * the same JSON from a mounted file. `ephemeral`: a fresh key per process (local runs, tests).
 * The public half is published as the ConfigMap `vcuda-jwks` (key `jwks.json`), which node agents
 * mount as a file, so they verify without ever calling the control plane.
 */
import { createPrivateKey, sign as cryptoSign, type JsonWebKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type * as jose from 'jose';
import { z } from 'zod';
import {
  ASSIGNMENT_ISSUER,
  type Assignment,
  assignmentSchema,
  generateSigningKey,
  jwksOf,
  type SigningKey,
  signAssignment,
  VcudaError,
} from '../contract/index.js';
import type { ControlPlaneKube } from './kube-client.js';

export const SIGNING_SECRET_NAME = 'vcuda-signing-keys';
export const SIGNING_SECRET_KEY = 'keys.json';
export const JWKS_CONFIGMAP_NAME = 'vcuda-jwks';
export const JWKS_CONFIGMAP_KEY = 'jwks.json';

const keyFileSchema = z.object({
  keys: z
    .array(
      z.object({
        kid: z.string().min(1),
        alg: z.enum(['EdDSA', 'ES256']),
        privateJwk: z.record(z.string(), z.unknown()),
        publicJwk: z.record(z.string(), z.unknown()),
      }),
    )
    .min(1),
});

export type KeySet = { active: SigningKey; all: SigningKey[]; jwks: jose.JSONWebKeySet };

export function parseKeyFile(text: string, where: string): KeySet {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new VcudaError('invalid', `${where}: signing keys are not JSON`);
  }
  const parsed = keyFileSchema.safeParse(json);
  if (!parsed.success) {
    throw new VcudaError('invalid', `${where}: signing keys must be {"keys":[{kid,alg,privateJwk,publicJwk},...]}`);
  }
  const all = parsed.data.keys as SigningKey[];
  refusePrivateMembers(all, where);
  return { active: all[0] as SigningKey, all, jwks: jwksOf(all) };
}

/** JWK members that are (parts of) a private or symmetric key (RFC 7518 sections 6.2.2, 6.3.2, 6.4). */
const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;

/**
 * The public JWKs are published to every node (ConfigMap vcuda-jwks): one carrying a private member
 * would hand out the signing key, so such a key set is refused before anything is published.
 */
function refusePrivateMembers(keys: readonly SigningKey[], where: string): void {
  keys.forEach((key, i) => {
    const found = PRIVATE_JWK_MEMBERS.filter((m) => m in key.publicJwk);
    if (found.length > 0) {
      throw new VcudaError(
        'invalid',
        `${where}: keys[${i}].publicJwk (kid ${key.kid}) holds private key members ${found.join(', ')}; ` +
          'it is published to every node, so it must be the public half only',
      );
    }
  });
}

export function serializeKeys(keys: readonly SigningKey[]): string {
  return JSON.stringify({ keys });
}

export type KeySource =
  | { kind: 'ephemeral' }
  | { kind: 'file'; path: string }
  | { kind: 'secret'; namespace: string; kid: string };

/** Loads (or, for a Secret that does not exist yet, creates) the shared keys. */
export async function loadSigningKeys(source: KeySource, kube?: ControlPlaneKube): Promise<KeySet> {
  if (source.kind === 'ephemeral') {
    const key = await generateSigningKey(`ephemeral-${Date.now().toString(36)}`);
    return { active: key, all: [key], jwks: jwksOf([key]) };
  }
  if (source.kind === 'file') return parseKeyFile(await readFile(source.path, 'utf8'), source.path);
  if (!kube) throw new VcudaError('invalid', 'signing key source "secret" needs a Kubernetes connection');
  const where = `secret ${source.namespace}/${SIGNING_SECRET_NAME}`;
  const existing = await kube.readSecret(source.namespace, SIGNING_SECRET_NAME);
  if (existing?.[SIGNING_SECRET_KEY]) return parseKeyFile(existing[SIGNING_SECRET_KEY], where);
  const key = await generateSigningKey(source.kid);
  try {
    await kube.createSecret(source.namespace, SIGNING_SECRET_NAME, { [SIGNING_SECRET_KEY]: serializeKeys([key]) });
    return { active: key, all: [key], jwks: jwksOf([key]) };
  } catch (err) {
    // Another replica created it first: use its keys, so all replicas sign alike.
    if (!(err instanceof VcudaError && err.code === 'conflict')) throw err;
    const winner = await kube.readSecret(source.namespace, SIGNING_SECRET_NAME);
    if (!winner?.[SIGNING_SECRET_KEY]) throw new VcudaError('unavailable', `${where} vanished while starting`);
    return parseKeyFile(winner[SIGNING_SECRET_KEY], where);
  }
}

/** Writes the public JWKS where node agents read it. */
export async function publishJwks(kube: ControlPlaneKube, namespace: string, keys: KeySet): Promise<void> {
  await kube.applyConfigMap(namespace, JWKS_CONFIGMAP_NAME, { [JWKS_CONFIGMAP_KEY]: JSON.stringify(keys.jwks) });
}

export type AssignmentSigner = { sign(a: Assignment, now: Date): Promise<string> };

/**
 * Signs assignments with the active key. EdDSA keys are imported once and sign synchronously with
 * node:crypto (tens of microseconds, no WebCrypto round trip, no key import per bind); Ed25519 is
 * deterministic, so the token is byte for byte the contract's signAssignment (tested). Other
 * algorithms go through signAssignment.
 */
export function createAssignmentSigner(keys: KeySet, ttlSeconds: number): AssignmentSigner {
  const key = keys.active;
  if (key.alg !== 'EdDSA') {
    return {
      sign: (a, now) => signAssignment(a, key, { nowSeconds: Math.floor(now.getTime() / 1000), ttlSeconds }),
    };
  }
  const sign = createEdDsaSigner(key, ttlSeconds);
  return { sign: async (a, now) => sign(a, now) };
}

/** Signs with an EdDSA key synchronously: the token signAssignment would make, byte for byte. */
export function createEdDsaSigner(key: SigningKey, ttlSeconds: number): (a: Assignment, now: Date) => string {
  const privateKey = createPrivateKey({ key: key.privateJwk as JsonWebKey, format: 'jwk' });
  const header = base64url(JSON.stringify({ alg: key.alg, kid: key.kid, typ: 'vcuda-assignment+jwt' }));
  return (a, now) => {
    const parsed = assignmentSchema.parse(a);
    const nowSeconds = Math.floor(now.getTime() / 1000);
    // Claim order as jose's SignJWT writes them: the assignment, then iss, sub, iat, exp.
    const claims = {
      ...parsed,
      iss: ASSIGNMENT_ISSUER,
      sub: parsed.pod.uid,
      iat: nowSeconds,
      exp: nowSeconds + ttlSeconds,
    };
    const input = `${header}.${base64url(JSON.stringify(claims))}`;
    return `${input}.${cryptoSign(null, Buffer.from(input), privateKey).toString('base64url')}`;
  };
}

function base64url(text: string): string {
  return Buffer.from(text).toString('base64url');
}
