/**
 * NUMA node and PCIe root of a PCI device, read from sysfs: `<sysfs>/bus/pci/devices/<domain:bus:dev.fn>/numa_node`
 * and the device's link there, which resolves under its root complex (`devices/pci0000:00/…`).
 * NVML prints an 8-digit domain (`00000000:3B:00.0`), sysfs a 4-digit lower-case one (`0000:3b:00.0`).
 */
import { readFileSync, realpathSync } from 'node:fs';
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

/** The root complex in a device's resolved sysfs path (`/sys/devices/pci0000:3a/0000:3a:00.0/…` → `pci0000:3a`). */
export function pcieRootOf(resolvedPath: string): string | undefined {
  return resolvedPath.split('/').find((part) => /^pci[0-9a-f]{4}:[0-9a-f]{2}$/.test(part));
}

/** The card's PCIe root (the `resource.kubernetes.io/pcieRoot` attribute), or undefined when sysfs does not say. */
export function readPcieRoot(pciBusId: string, sysfsRoot: string): string | undefined {
  const address = sysfsPciAddress(pciBusId);
  if (!address) return undefined;
  try {
    return pcieRootOf(realpathSync(join(sysfsRoot, 'bus/pci/devices', address)));
  } catch {
    // No sysfs entry (a VM without the topology, a container without /sys): the root is unknown.
    return undefined;
  }
}
