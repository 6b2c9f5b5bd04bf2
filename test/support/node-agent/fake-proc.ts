/**
 * A process as the node agent reads it under `paths.procRoot`: its cgroup (a containerd container of
 * a kubelet pod, systemd driver), its pid in the container's namespace, and its start time.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function writeFakeProcess(
  procRoot: string,
  p: { pid: number; podUid: string; nsPid: number; containerId?: string; startTicks?: number },
): void {
  const dir = join(procRoot, String(p.pid));
  mkdirSync(dir, { recursive: true });
  const slice = `kubepods-pod${p.podUid.replace(/-/g, '_')}.slice`;
  const scope = `cri-containerd-${p.containerId ?? 'e'.repeat(64)}.scope`;
  writeFileSync(join(dir, 'cgroup'), `0::/kubepods.slice/${slice}/${scope}\n`);
  writeFileSync(join(dir, 'status'), `Name:\tpython\nNSpid:\t${p.pid}\t${p.nsPid}\n`);
  const fields = ['S', ...Array(18).fill('0'), String(p.startTicks ?? 900), '0'];
  writeFileSync(join(dir, 'stat'), `${p.pid} (python) ${fields.join(' ')}\n`);
}
