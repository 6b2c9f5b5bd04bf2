/**
 * Which Kubernetes container a host process belongs to, from the text of `/proc/PID/cgroup`.
 * Pure: the caller reads the file. Handles cgroup v2 (`0::/…`) and v1 (`N:controllers:/…`), the
 * systemd driver (`kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope`)
 * and the cgroupfs driver (`/kubepods/burstable/pod<uid>/<id>`), for containerd, CRI-O and
 * Docker runtimes.
 */

export type ContainerIdentity = {
  /** Pod UID with dashes, lower case. */
  podUid: string;
  /** Container runtime id (64 hex), without the runtime prefix. */
  containerId: string;
};

const POD_SEGMENT = /^(?:kubepods(?:-[a-z]+)*-)?pod([0-9a-fA-F_-]{32,36})(?:\.slice)?$/;
const CONTAINER_SEGMENT = /^(?:(?:cri-containerd|crio|docker|containerd)-)?([0-9a-f]{64})(?:\.scope)?$/;

function normalizeUid(raw: string): string {
  return raw.replace(/_/g, '-').toLowerCase();
}

/** The identity in one cgroup path, or null when the path is not a pod container's. */
export function parseCgroupPath(path: string): ContainerIdentity | null {
  const segments = path.split('/').filter((s) => s.length > 0);
  for (let i = 0; i < segments.length - 1; i++) {
    const pod = POD_SEGMENT.exec(segments[i] as string);
    if (!pod) continue;
    const container = CONTAINER_SEGMENT.exec(segments[i + 1] as string);
    if (!container) continue;
    return { podUid: normalizeUid(pod[1] as string), containerId: container[1] as string };
  }
  return null;
}

/**
 * The identity in the text of `/proc/PID/cgroup`: the v2 line when present, else the first v1
 * line that names a pod container (all v1 hierarchies carry the same path for a container).
 */
export function parseProcCgroup(text: string): ContainerIdentity | null {
  const lines = text.split('\n').filter((l) => l.trim().length > 0);
  const entries = lines.map((line) => {
    const first = line.indexOf(':');
    const second = line.indexOf(':', first + 1);
    return { hierarchy: line.slice(0, first), path: second >= 0 ? line.slice(second + 1) : '' };
  });
  const v2 = entries.find((e) => e.hierarchy === '0');
  if (v2) {
    const found = parseCgroupPath(v2.path);
    if (found) return found;
  }
  for (const e of entries) {
    const found = parseCgroupPath(e.path);
    if (found) return found;
  }
  return null;
}
