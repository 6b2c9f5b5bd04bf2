import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Assignment, generateSigningKey, signAssignment, verifyAssignment } from '../contract/index.js';
import { type FakeKubeApi, startFakeKubeApi } from '../test/support/control-plane/fake-kube-api.js';
import { createKubeClient } from './kube-client.js';
import { createAssignmentSigner, loadSigningKeys, parseKeyFile, serializeKeys } from './signing-keys.js';

describe('signing keys', () => {
  let api: FakeKubeApi | undefined;
  afterEach(async () => {
    await api?.close();
    api = undefined;
  });

  it('replicas starting together end up with one shared key set', async () => {
    api = await startFakeKubeApi();
    const kube = createKubeClient(api.kubeConfig);
    const source = { kind: 'secret' as const, namespace: 'vcuda-system', kid: 'k1' };
    const sets = await Promise.all([1, 2, 3].map(() => loadSigningKeys(source, kube)));
    const stored = parseKeyFile(
      Buffer.from(
        (api.secrets.get('vcuda-system/vcuda-signing-keys') as unknown as { data: Record<string, string> }).data[
          'keys.json'
        ] as string,
        'base64',
      ).toString('utf8'),
      'secret',
    );
    for (const s of sets) expect(s.jwks).toEqual(stored.jwks);
  });

  it('reads rotated keys from a file: signs with the first, publishes all', async () => {
    const newer = await generateSigningKey('new');
    const older = await generateSigningKey('old', 'ES256');
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-keys-'));
    const file = join(dir, 'keys.json');
    writeFileSync(file, serializeKeys([newer, older]));
    const keys = await loadSigningKeys({ kind: 'file', path: file });
    expect(keys.active.kid).toBe('new');
    expect(keys.jwks.keys.map((k) => k.kid)).toEqual(['new', 'old']);
    const token = await createAssignmentSigner(keys, 60).sign(
      {
        v: 1,
        pod: { uid: 'u', namespace: 'ns', name: 'p' },
        node: 'n',
        cluster: 'c',
        containers: [
          {
            name: 'c',
            isInit: false,
            cards: [{ uuid: 'GPU-1', core: 30, memoryBytes: 1 }],
            coreLimit: 30,
            mode: 'hard',
          },
        ],
      },
      new Date('2026-11-22T04:00:00Z'),
    );
    const verified = await verifyAssignment(token, keys.jwks, {
      podUid: 'u',
      node: 'n',
      nowSeconds: Date.parse('2026-11-22T04:00:30Z') / 1000,
    });
    expect(verified.kid).toBe('new');
  });

  it('signs EdDSA assignments byte for byte as the contract does, and they verify', async () => {
    const key = await generateSigningKey('k1', 'EdDSA');
    const keys = parseKeyFile(serializeKeys([key]), 'keys.json');
    const a: Assignment = {
      v: 1,
      pod: { uid: 'uid-x', namespace: 'team-a', name: 'trainer-0' },
      node: 'gpu-1',
      cluster: 'east',
      containers: [
        {
          name: 'init',
          isInit: true,
          cards: [{ uuid: 'GPU-2', core: 100, memoryBytes: 2 ** 34 }],
          coreLimit: 100,
          mode: 'hard',
        },
        {
          name: 'main',
          isInit: false,
          cards: [{ uuid: 'GPU-1', core: 30, memoryBytes: 8 * 2 ** 30 }],
          coreLimit: 60,
          mode: 'soft',
        },
      ],
    };
    const now = new Date('2026-11-22T04:00:00.750Z');
    const token = await createAssignmentSigner(keys, 600).sign(a, now);
    expect(token).toBe(
      await signAssignment(a, keys.active, { nowSeconds: Math.floor(now.getTime() / 1000), ttlSeconds: 600 }),
    );
    const verified = await verifyAssignment(token, keys.jwks, {
      podUid: 'uid-x',
      node: 'gpu-1',
      nowSeconds: now.getTime() / 1000,
    });
    expect(verified).toMatchObject({ ...a, kid: 'k1', expiresAt: Math.floor(now.getTime() / 1000) + 600 });
    // A claim the contract refuses is refused here too.
    await expect(createAssignmentSigner(keys, 600).sign({ ...a, node: '' }, now)).rejects.toThrow();
  });

  it.each([
    { name: 'not JSON', text: 'nope', message: /not JSON/ },
    { name: 'no keys', text: '{"keys":[]}', message: /signing keys must be/ },
  ])('refuses a key file that is $name', ({ text, message }) => {
    expect(() => parseKeyFile(text, 'keys.json')).toThrow(message);
  });

  it('refuses at start a key file whose public JWK carries private members', async () => {
    const good = await generateSigningKey('good');
    const leaky = await generateSigningKey('leaky', 'ES256');
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-keys-'));
    const file = join(dir, 'keys.json');
    // An operator who pasted the private JWK in both places.
    writeFileSync(file, serializeKeys([good, { ...leaky, publicJwk: leaky.privateJwk }]));
    await expect(loadSigningKeys({ kind: 'file', path: file })).rejects.toThrow(
      new RegExp(`${file}: keys\\[1\\]\\.publicJwk \\(kid leaky\\) holds private key members d;`),
    );
    for (const extra of [{ k: 'c2VjcmV0' }, { p: 'x', q: 'y', dp: 'a', dq: 'b', qi: 'c' }]) {
      const text = serializeKeys([{ ...good, publicJwk: { ...good.publicJwk, ...extra } }]);
      expect(() => parseKeyFile(text, 'keys.json')).toThrow(/holds private key members/);
    }
  });
});
