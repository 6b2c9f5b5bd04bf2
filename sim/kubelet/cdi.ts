/**
 * The container runtime's CDI step, as far as a simulated container needs it: the env and mount
 * edits of each CDI device the device plugin or a DRA driver named (a spec's own edits with each
 * of its devices), resolved at container creation (as containerd and
 * CRI-O do, after PreStartContainer). A device no spec describes cannot be resolved, and the
 * runtime does not create the container.
 *
 * Like containerd's CDI cache, the specs are parsed once and kept, not re-read for every
 * container: a directory whose mtime moved is listed again and only its new files are parsed, and
 * a device is served only after its file is checked unchanged (inode, size, mtime, so a spec
 * replaced by rename is seen at once). A device the cache does not know, or whose file changed,
 * rescans every directory before the start fails: a spec the node agent wrote during
 * PreStartContainer, just before the start, is always found.
 */
import { closeSync, fstatSync, openSync, readdirSync, readFileSync, type Stats, statSync } from 'node:fs';
import { join } from 'node:path';

type CdiMount = { hostPath: string; containerPath: string; options?: string[] };
type ContainerEdits = { env?: string[]; mounts?: CdiMount[] };
type CdiSpec = {
  kind?: string;
  containerEdits?: ContainerEdits;
  devices?: { name?: string; containerEdits?: ContainerEdits }[];
};

/** What a device adds to a container: its spec's own edits, then the device's. */
export type CdiEdits = { env: string[]; mounts: CdiMount[] };

/** One spec file as parsed: its stamp when read, and the edits of each device (`kind=name`). */
type SpecFile = { stamp: string; devices: Map<string, CdiEdits> };

type SpecDir = { stamp: string; files: Map<string, SpecFile> };

/** What changes when a file is rewritten in place or replaced by rename. */
function stampOf(st: Stats): string {
  return `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}

function statStamp(path: string): string | undefined {
  try {
    return stampOf(statSync(path));
  } catch {
    return undefined; // gone
  }
}

/** The devices a spec declares; a file that is not a spec declares none (until it changes). */
function devicesOf(spec: CdiSpec): Map<string, CdiEdits> {
  const out = new Map<string, CdiEdits>();
  const common = spec.containerEdits;
  for (const d of spec.devices ?? []) {
    const key = `${spec.kind}=${d.name}`;
    if (!spec.kind || !d.name || out.has(key)) continue;
    const own = d.containerEdits;
    out.set(key, {
      env: [...(common?.env ?? []), ...(own?.env ?? [])],
      mounts: [...(common?.mounts ?? []), ...(own?.mounts ?? [])],
    });
  }
  return out;
}

/** Reads a spec; the stamp is taken from the open file, so it always matches what was read. */
function readSpecFile(path: string): SpecFile | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return undefined; // removed since it was listed
  }
  try {
    const stamp = stampOf(fstatSync(fd));
    try {
      return { stamp, devices: devicesOf(JSON.parse(readFileSync(fd, 'utf8')) as CdiSpec) };
    } catch {
      return { stamp, devices: new Map() };
    }
  } finally {
    closeSync(fd);
  }
}

function specFileNames(dir: string): string[] {
  try {
    return readdirSync(dir).filter((f) => f.endsWith('.json'));
  } catch {
    return []; // no spec directory (yet): no devices
  }
}

/** A node runtime's CDI cache over its spec directories, searched in order. */
export class CdiCache {
  private readonly dirs = new Map<string, SpecDir>();

  constructor(private readonly specDirs: readonly string[]) {}

  /** Env of the named CDI devices (`vendor/class=name`); throws on a device no spec describes. */
  env(names: readonly string[]): Record<string, string> {
    const env: Record<string, string> = {};
    for (const kv of this.edits(names).env) {
      const at = kv.indexOf('=');
      if (at > 0) env[kv.slice(0, at)] = kv.slice(at + 1);
    }
    return env;
  }

  /** The edits of the named CDI devices, in order (a spec's own mounts once); throws on a device no spec describes. */
  edits(names: readonly string[]): CdiEdits {
    const out: CdiEdits = { env: [], mounts: [] };
    if (names.length === 0) return out;
    for (const dir of this.specDirs) this.refresh(dir, false);
    for (const qualified of names) {
      let edits = this.lookup(qualified, true);
      if (!edits) {
        for (const dir of this.specDirs) this.refresh(dir, true);
        edits = this.lookup(qualified, false);
      }
      if (!edits) throw new Error(`failed to inject CDI devices: unresolvable CDI devices ${qualified}`);
      out.env.push(...edits.env);
      for (const m of edits.mounts)
        if (!out.mounts.some((x) => x.containerPath === m.containerPath)) out.mounts.push(m);
    }
    return out;
  }

  /** The device's env edits from the first file declaring it; with `check`, only if that file is unchanged since read. */
  private lookup(qualified: string, check: boolean): CdiEdits | undefined {
    for (const dir of this.specDirs) {
      for (const [name, file] of this.dirs.get(dir)?.files ?? []) {
        const edits = file.devices.get(qualified);
        if (!edits) continue;
        return !check || statStamp(join(dir, name)) === file.stamp ? edits : undefined;
      }
    }
    return undefined;
  }

  /**
   * Lists `dir` again when its mtime moved (or always, with `full`), parsing files it has not
   * seen; `full` also re-reads every file whose stamp changed.
   */
  private refresh(dir: string, full: boolean): void {
    const stamp = statStamp(dir) ?? 'missing';
    const known = this.dirs.get(dir);
    if (known && known.stamp === stamp && !full) return;
    const files = new Map<string, SpecFile>();
    for (const name of specFileNames(dir)) {
      const cached = known?.files.get(name);
      const fresh = cached && (!full || statStamp(join(dir, name)) === cached.stamp);
      const file = fresh ? cached : readSpecFile(join(dir, name));
      if (file) files.set(name, file);
    }
    // The stamp from before the listing: a change made during it is listed again next time.
    this.dirs.set(dir, { stamp, files });
  }
}
