/**
 * NUMA node of a PCI device, read from sysfs: `<sysfs>/bus/pci/devices/<domain:bus:dev.fn>/numa_node`.
 * NVML prints an 8-digit domain (`00000000:3B:00.0`), sysfs a 4-digit lower-case one (`0000:3b:00.0`).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** `00000000:3B:00.0` → `0000:3b:00.0`; undefined when it is not a PCI bus id. */
export function sysfsPciAddress(pciBusId: string): string | undefined {
  const m = /^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$/.exec(pciBusId.trim());
  if (!m) return undefined;
  const domain = (m[1] as string).slice(-4);
  return `${domain}:${m[2]}:${m[3]}.${m[4]}`.toLowerCase();
}

/** The card's NUMA node, or null when sysfs has none (-1, missing file, not a PCI id). */
export function readNumaNode(pciBusId: string, sysfsRoot: string): number | null {
  const address = sysfsPciAddress(pciBusId);
  if (!address) return null;
  try {
    const text = readFileSync(join(sysfsRoot, 'bus/pci/devices', address, 'numa_node'), 'utf8').trim();
    const n = Number(text);
    return Number.isInteger(n) && n >= 0 ? n : null;
  } catch {
    // No sysfs entry (a VM, a container without /sys): the card's NUMA node is unknown.
    return null;
  }
}
