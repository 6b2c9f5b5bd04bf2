import * as jose from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type Assignment,
  AssignmentError,
  generateSigningKey,
  jwksOf,
  peekAssignment,
  type SigningKey,
  signAssignment,
  verifyAssignment,
} from './assignment.js';

const NOW = 1_800_000_000;
const assignment: Assignment = {
  v: 1,
  pod: { uid: 'pod-uid-1', namespace: 'team-a', name: 'share-30' },
  node: 'gpu-node-a',
  cluster: 'prod-eu',
  containers: [
    {
      name: 'model',
      isInit: false,
      cards: [{ uuid: 'GPU-11111111-2222-3333-4444-555555555555', core: 30, memoryBytes: 8 * 2 ** 30 }],
      coreLimit: 60,
      mode: 'soft',
    },
  ],
};
const expectOk = { podUid: 'pod-uid-1', node: 'gpu-node-a', nowSeconds: NOW + 10 };

let ed: SigningKey;
let es: SigningKey;
let other: SigningKey;

beforeAll(async () => {
  [ed, es, other] = await Promise.all([
    generateSigningKey('k-2026-11'),
    generateSigningKey('k-es', 'ES256'),
    generateSigningKey('k-2026-11'), // same kid, different key: a forgery
  ]);
});

async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(AssignmentError);
    return (err as AssignmentError).code;
  }
  throw new Error('expected a refusal');
}

describe('signed assignment', () => {
  it('carries a whole MIG instance by its MIG- UUID with its parent, profile and placement', async () => {
    const mig = {
      uuid: 'MIG-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0',
      core: 100,
      memoryBytes: 40448 * 2 ** 20,
      mig: { parent: 'GPU-11111111-2222-3333-4444-555555555555', profile: '3g.40gb', start: 4, size: 4 },
    };
    const withMig: Assignment = {
      ...assignment,
      containers: [{ name: 'train', isInit: false, cards: [mig], coreLimit: 100, mode: 'hard' }],
    };
    const token = await signAssignment(withMig, ed, { nowSeconds: NOW, ttlSeconds: 600 });
    expect((await verifyAssignment(token, jwksOf([ed]), expectOk)).containers[0]?.cards[0]).toEqual(mig);
    const share = { ...withMig, containers: [{ ...withMig.containers[0]!, cards: [{ ...mig, core: 50 }] }] };
    await expect(signAssignment(share, ed, { nowSeconds: NOW, ttlSeconds: 600 })).rejects.toThrow(
      'a MIG instance is granted whole (core 100), by its MIG- UUID',
    );
  });

  it('round-trips with EdDSA and ES256, keeping every claim', async () => {
    for (const key of [ed, es]) {
      const token = await signAssignment(assignment, key, { nowSeconds: NOW, ttlSeconds: 600 });
      expect(token.split('.')).toHaveLength(3);
      expect(jose.decodeProtectedHeader(token)).toMatchObject({ kid: key.kid, alg: key.alg });
      const verified = await verifyAssignment(token, jwksOf([ed, es]), expectOk);
      expect(verified).toEqual({ ...assignment, issuedAt: NOW, expiresAt: NOW + 600, kid: key.kid });
    }
  });

  it('verifies against a JWKS holding several keys (rotation)', async () => {
    const newKey = await generateSigningKey('k-2026-12');
    const oldToken = await signAssignment(assignment, ed, { nowSeconds: NOW, ttlSeconds: 600 });
    const newToken = await signAssignment(assignment, newKey, { nowSeconds: NOW, ttlSeconds: 600 });
    const jwks = jwksOf([ed, newKey]);
    await expect(verifyAssignment(oldToken, jwks, expectOk)).resolves.toMatchObject({ kid: 'k-2026-11' });
    await expect(verifyAssignment(newToken, jwks, expectOk)).resolves.toMatchObject({ kid: 'k-2026-12' });
  });

  it('refuses a bad signature', async () => {
    const forged = await signAssignment(assignment, other, { nowSeconds: NOW, ttlSeconds: 600 });
    expect(await refusal(verifyAssignment(forged, jwksOf([ed]), expectOk))).toBe('bad-signature');
  });

  it('checks a key replaced under the same kid with its new material, never the one verified before', async () => {
    const token = await signAssignment(assignment, ed, { nowSeconds: NOW, ttlSeconds: 600 });
    await expect(verifyAssignment(token, jwksOf([ed]), expectOk)).resolves.toMatchObject({ kid: 'k-2026-11' });
    // The same kid now names `other`'s key: ed's token no longer verifies, other's does.
    expect(await refusal(verifyAssignment(token, jwksOf([other]), expectOk))).toBe('bad-signature');
    const byOther = await signAssignment(assignment, other, { nowSeconds: NOW, ttlSeconds: 600 });
    await expect(verifyAssignment(byOther, jwksOf([other]), expectOk)).resolves.toMatchObject({ kid: 'k-2026-11' });
    expect(await refusal(verifyAssignment(byOther, jwksOf([ed]), expectOk))).toBe('bad-signature');
  });

  it('refuses a tampered payload', async () => {
    const token = await signAssignment(assignment, ed, { nowSeconds: NOW, ttlSeconds: 600 });
    const [h, p, s] = token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
    claims.containers[0].cards[0].core = 100;
    const tampered = `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`;
    expect(await refusal(verifyAssignment(tampered, jwksOf([ed]), expectOk))).toBe('bad-signature');
  });

  it('refuses an unknown kid', async () => {
    const token = await signAssignment(assignment, es, { nowSeconds: NOW, ttlSeconds: 600 });
    expect(await refusal(verifyAssignment(token, jwksOf([ed]), expectOk))).toBe('unknown-kid');
  });

  it("refuses another pod's assignment", async () => {
    const token = await signAssignment(assignment, ed, { nowSeconds: NOW, ttlSeconds: 600 });
    const wrong = { ...expectOk, podUid: 'pod-uid-2' };
    expect(await refusal(verifyAssignment(token, jwksOf([ed]), wrong))).toBe('wrong-pod');
  });

  it("refuses another node's assignment", async () => {
    const token = await signAssignment(assignment, ed, { nowSeconds: NOW, ttlSeconds: 600 });
    const wrong = { ...expectOk, node: 'gpu-node-b' };
    expect(await refusal(verifyAssignment(token, jwksOf([ed]), wrong))).toBe('wrong-node');
  });

  it('refuses an expired assignment, unless expiry is waived for a running pod', async () => {
    const token = await signAssignment(assignment, ed, { nowSeconds: NOW, ttlSeconds: 60 });
    const late = { ...expectOk, nowSeconds: NOW + 61 };
    expect(await refusal(verifyAssignment(token, jwksOf([ed]), late))).toBe('expired');
    await expect(verifyAssignment(token, jwksOf([ed]), { ...late, ignoreExpiry: true })).resolves.toBeTruthy();
  });

  it.each([
    ['empty', ''],
    ['not a JWS', 'hello'],
    ['two parts', 'a.b'],
    ['garbage header', 'e30.e30.e30'],
  ])('refuses malformed input: %s', async (_name, token) => {
    expect(await refusal(verifyAssignment(token, jwksOf([ed]), expectOk))).toBe('malformed');
  });

  it('refuses a signed token whose claims are not an assignment', async () => {
    const key = await jose.importJWK(ed.privateJwk, 'EdDSA');
    const token = await new jose.SignJWT({ hello: 'world' })
      .setProtectedHeader({ alg: 'EdDSA', kid: ed.kid })
      .setIssuer('vcuda-control-plane')
      .setSubject('pod-uid-1')
      .setIssuedAt(NOW)
      .setExpirationTime(NOW + 60)
      .sign(key);
    expect(await refusal(verifyAssignment(token, jwksOf([ed]), expectOk))).toBe('malformed');
  });

  it('refuses an unsigned (alg none) token', async () => {
    const unsigned = new jose.UnsecuredJWT({ ...assignment }).setIssuer('vcuda-control-plane').encode();
    expect(await refusal(verifyAssignment(unsigned, jwksOf([ed]), expectOk))).toBe('malformed');
  });

  it('refuses to sign an invalid assignment', async () => {
    const bad = { ...assignment, containers: [] };
    await expect(signAssignment(bad, ed, { nowSeconds: NOW, ttlSeconds: 60 })).rejects.toThrow();
  });

  it('peeks at claims without trusting them', async () => {
    const token = await signAssignment(assignment, ed, { nowSeconds: NOW, ttlSeconds: 60 });
    expect(peekAssignment(token)?.node).toBe('gpu-node-a');
    expect(peekAssignment('nonsense')).toBeUndefined();
  });
});
