import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pcieRootOf, readNumaNode, readPcieRoot, sysfsPciAddress } from './numa.js';

const root = mkdtempSync(join(tmpdir(), 'vcuda-sysfs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function device(address: string, numa: string) {
  const dir = join(root, 'bus/pci/devices', address);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'numa_node'), `${numa}\n`);
}

describe('NUMA node from sysfs', () => {
  it('translates NVML bus ids to sysfs addresses', () => {
    expect(sysfsPciAddress('00000000:3B:00.0')).toBe('0000:3b:00.0');
    expect(sysfsPciAddress('0001:AF:00.0')).toBe('0001:af:00.0');
    expect(sysfsPciAddress('GPU-1')).toBeUndefined();
  });

  it('reads the node, and null for -1, a missing device or garbage', () => {
    device('0000:3b:00.0', '1');
    device('0000:5e:00.0', '-1');
    device('0000:86:00.0', 'x');
    expect(readNumaNode('00000000:3B:00.0', root)).toBe(1);
    expect(readNumaNode('00000000:5E:00.0', root)).toBeNull();
    expect(readNumaNode('00000000:86:00.0', root)).toBeNull();
    expect(readNumaNode('00000000:99:00.0', root)).toBeNull();
  });
});

describe('PCIe root from sysfs', () => {
  it("follows the device's link to its root complex; undefined where sysfs does not say", () => {
    const real = join(root, 'devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0');
    mkdirSync(real, { recursive: true });
    mkdirSync(join(root, 'bus/pci/devices'), { recursive: true });
    symlinkSync(real, join(root, 'bus/pci/devices/0000:3b:01.0'));
    expect(readPcieRoot('00000000:3B:01.0', root)).toBe('pci0000:3a');
    expect(readPcieRoot('00000000:99:00.0', root)).toBeUndefined();
    expect(pcieRootOf('/sys/devices/platform/foo')).toBeUndefined();
  });
});
