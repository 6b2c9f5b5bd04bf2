/**
 * The container runtime's CDI step, as far as a simulated container needs it: the env edits of
 * each CDI device the device plugin named, resolved at container creation (as containerd and
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

type CdiSpec = { kind?: string; devices?: { name?: string; containerEdits?: { env?: string[] } }[] };

/** One spec file as parsed: its stamp when read, and the env edits of each device (`kind=name`). */
type SpecFile = { stamp: string; devices: Map<string, string[]> };

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
function devicesOf(spec: CdiSpec): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const d of spec.devices ?? []) {
    const key = `${spec.kind}=${d.name}`;
    if (spec.kind && d.name && !out.has(key)) out.set(key, d.containerEdits?.env ?? []);
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
    if (names.length === 0) return {};
    for (const dir of this.specDirs) this.refresh(dir, false);
    const env: Record<string, string> = {};
    for (const qualified of names) {
      let edits = this.lookup(qualified, true);
      if (!edits) {
        for (const dir of this.specDirs) this.refresh(dir, true);
        edits = this.lookup(qualified, false);
      }
      if (!edits) throw new Error(`failed to inject CDI devices: unresolvable CDI devices ${qualified}`);
      for (const kv of edits) {
        const at = kv.indexOf('=');
        if (at > 0) env[kv.slice(0, at)] = kv.slice(at + 1);
      }
    }
    return env;
  }

  /** The device's env edits from the first file declaring it; with `check`, only if that file is unchanged since read. */
  private lookup(qualified: string, check: boolean): string[] | undefined {
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
