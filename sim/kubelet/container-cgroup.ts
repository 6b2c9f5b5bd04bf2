/**
 * The simulated container runtime's cgroup view of a node's containers, for the node agent's
 * `paths.procRoot`: containers here are plain host processes without cgroups, so for each one the
 * runtime writes `<procDir>/<pid>/cgroup` naming the pod and container as containerd's systemd
 * driver does (`kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope`), with `status` and
 * `stat` linked to the process's own `/proc` entries. The agent then maps NVML's host pids to
 * containers and publishes host-pid maps exactly as it does on a real node.
 */
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** `/proc/PID/cgroup` of a container process (cgroup v2, containerd, systemd cgroup driver). */
export function containerCgroupText(podUid: string, containerId: string): string {
  const pod = podUid.replaceAll('-', '_');
  return (
    `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${pod}.slice/` +
    `cri-containerd-${containerId}.scope\n`
  );
}

/** Publishes the process's entry; returns what removes it (when the process has exited). */
export function publishContainerProc(procDir: string, pid: number, podUid: string, containerId: string): () => void {
  const dir = join(procDir, String(pid));
  rmSync(dir, { recursive: true, force: true }); // a pid reused since a crash left its entry
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'cgroup'), containerCgroupText(podUid, containerId));
  for (const f of ['status', 'stat']) symlinkSync(`/proc/${pid}/${f}`, join(dir, f));
  return () => rmSync(dir, { recursive: true, force: true });
}
