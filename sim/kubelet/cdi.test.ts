import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CdiCache } from './cdi.js';

const root = mkdtempSync(join(tmpdir(), 'vcuda-cdi-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const spec = (name: string, uuid: string) => ({
  cdiVersion: '0.5.0',
  kind: 'vcuda.io/allocation',
  devices: [{ name, containerEdits: { env: [`NVIDIA_VISIBLE_DEVICES=${uuid}`] } }],
});

/** As the node agent writes a spec: a temporary file renamed into place. */
function writeSpec(dir: string, file: string, body: object): void {
  writeFileSync(join(dir, `${file}.tmp`), JSON.stringify(body));
  renameSync(join(dir, `${file}.tmp`), join(dir, file));
}

const visible = (cache: CdiCache, device: string) =>
  cache.env([`vcuda.io/allocation=${device}`])['NVIDIA_VISIBLE_DEVICES'];

describe('CDI cache', () => {
  it('finds a device in any spec file of its kind, and refuses one no spec describes', () => {
    const dir = mkdtempSync(join(root, 'specs-'));
    writeFileSync(join(dir, 'a.json'), JSON.stringify(spec('a1', 'GPU-1')));
    writeFileSync(join(dir, 'b.json'), JSON.stringify(spec('b2', 'GPU-2')));
    const cache = new CdiCache([mkdtempSync(join(root, 'empty-')), join(root, 'missing'), dir]);
    expect(cache.env(['vcuda.io/allocation=b2'])).toEqual({ NVIDIA_VISIBLE_DEVICES: 'GPU-2' });
    expect(cache.env(['vcuda.io/allocation=a1'])).toEqual({ NVIDIA_VISIBLE_DEVICES: 'GPU-1' });
    expect(() => cache.env(['vcuda.io/allocation=c3'])).toThrow(/unresolvable CDI devices vcuda.io\/allocation=c3/);
    expect(() => cache.env(['other.io/allocation=a1'])).toThrow(/unresolvable CDI devices other.io\/allocation=a1/);
  });

  it('resolves a spec written just before the start, however soon after the last one, or in a file already read', () => {
    const dir = mkdtempSync(join(root, 'specs-'));
    const cache = new CdiCache([dir]);
    // Back to back, so several land within one tick of the directory's mtime.
    for (let i = 0; i < 50; i++) {
      writeSpec(dir, `d${i}.json`, spec(`d${i}`, `GPU-${i}`));
      expect(visible(cache, `d${i}`)).toBe(`GPU-${i}`);
    }
    // A device added to a file already read: the directory itself did not change.
    const both = spec('d0', 'GPU-0');
    both.devices.push(spec('e0', 'GPU-e').devices[0]!);
    writeFileSync(join(dir, 'd0.json'), JSON.stringify(both));
    expect(visible(cache, 'e0')).toBe('GPU-e');
  });

  it('never serves a replaced or removed spec from the cache', () => {
    const dir = mkdtempSync(join(root, 'specs-'));
    const cache = new CdiCache([dir]);
    writeSpec(dir, 'x.json', spec('x', 'GPU-old'));
    expect(visible(cache, 'x')).toBe('GPU-old');
    writeSpec(dir, 'x.json', spec('x', 'GPU-new'));
    expect(visible(cache, 'x')).toBe('GPU-new');
    // Rewritten in place (not by rename) to the same length: the mtime and ctime still differ.
    writeFileSync(join(dir, 'x.json'), JSON.stringify(spec('x', 'GPU-abc')));
    expect(visible(cache, 'x')).toBe('GPU-abc');
    // Moved to a file that sorts after another spec of the same directory.
    writeSpec(dir, 'w.json', spec('w', 'GPU-w'));
    writeSpec(dir, 'x.json', spec('y', 'GPU-y'));
    writeSpec(dir, 'z.json', spec('x', 'GPU-z'));
    expect(visible(cache, 'x')).toBe('GPU-z');
    rmSync(join(dir, 'z.json'));
    expect(() => visible(cache, 'x')).toThrow(/unresolvable CDI devices vcuda.io\/allocation=x/);
  });
});
