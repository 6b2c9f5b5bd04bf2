/**
 * The simulated container runtime's cgroup view of a node's containers, for the node agent's
 * `paths.procRoot`: containers here are plain host processes without cgroups, so for each one the
 * runtime writes `<procDir>/<pid>/cgroup` naming the pod and container as containerd's systemd
 * driver does (`kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope`), with `status` and
 * `stat` linked to the process's own `/proc` entries. The agent then maps NVML's host pids to
 * containers and publishes host-pid maps exactly as it does on a real node.
 *
 * As containerd creates a container's cgroup, the runtime process (`runtime-process.ts`) writes
 * the entry, right after it forks the container and before it reports the pid, and removes it
 * before it reports the exit; the kubelet's process does no file work per container for it.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';

/** `/proc/PID/cgroup` of a container process (cgroup v2, containerd, systemd cgroup driver). */
export function containerCgroupText(podUid: string, containerId: string): string {
  const pod = podUid.replaceAll('-', '_');
  return (
    `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${pod}.slice/` +
    `cri-containerd-${containerId}.scope\n`
  );
}

/** What the runtime publishes for one container: where, and the cgroup text. */
export type ProcEntry = { procDir: string; cgroup: string };

/** Removes a container's entry (the runtime process died before it could). */
export function removeContainerProc(procDir: string, pid: number): void {
  rmSync(join(procDir, String(pid)), { recursive: true, force: true });
}

/**
 * The runtime process's side (plain CommonJS spliced into its source; it needs `fs` and `path`
 * in scope): `publishProc` once the container is forked, `unpublishProc` once it has exited.
 */
export const PROC_ENTRY_SOURCE = `
function publishProc(entry, pid) {
  const dir = path.join(entry.procDir, String(pid));
  fs.rmSync(dir, { recursive: true, force: true }); // a pid reused since a crash left its entry
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'cgroup'), entry.cgroup);
  for (const f of ['status', 'stat']) fs.symlinkSync('/proc/' + pid + '/' + f, path.join(dir, f));
}
function unpublishProc(entry, pid) {
  fs.rmSync(path.join(entry.procDir, String(pid)), { recursive: true, force: true });
}
`;
