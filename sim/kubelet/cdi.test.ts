import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cdiEnv } from './cdi.js';

const dir = mkdtempSync(join(tmpdir(), 'vcuda-cdi-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const spec = (name: string, uuid: string) => ({
  cdiVersion: '0.5.0',
  kind: 'vcuda.io/allocation',
  devices: [{ name, containerEdits: { env: [`NVIDIA_VISIBLE_DEVICES=${uuid}`] } }],
});

describe('cdiEnv', () => {
  it('finds a device in any spec file of its kind, and refuses one no spec describes', () => {
    writeFileSync(join(dir, 'a.json'), JSON.stringify(spec('a1', 'GPU-1')));
    writeFileSync(join(dir, 'b.json'), JSON.stringify(spec('b2', 'GPU-2')));
    expect(cdiEnv(['vcuda.io/allocation=b2'], [dir])).toEqual({ NVIDIA_VISIBLE_DEVICES: 'GPU-2' });
    expect(cdiEnv(['vcuda.io/allocation=a1'], [dir])).toEqual({ NVIDIA_VISIBLE_DEVICES: 'GPU-1' });
    expect(() => cdiEnv(['vcuda.io/allocation=c3'], [dir])).toThrow(/unresolvable CDI devices vcuda.io\/allocation=c3/);
  });
});
