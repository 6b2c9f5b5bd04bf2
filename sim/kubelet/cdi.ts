/**
 * The container runtime's CDI step, as far as a simulated container needs it: the env edits of
 * each CDI device the device plugin named, read from the spec files at container creation (as
 * containerd and CRI-O do, after PreStartContainer). A device no spec describes cannot be
 * resolved, and the runtime does not create the container.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

type CdiSpec = { kind?: string; devices?: { name?: string; containerEdits?: { env?: string[] } }[] };

function specsIn(dir: string): CdiSpec[] {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  } catch {
    return [];
  }
  return files.flatMap((f) => {
    try {
      return [JSON.parse(readFileSync(join(dir, f), 'utf8')) as CdiSpec];
    } catch {
      return [];
    }
  });
}

/** Env of the named CDI devices (`vendor/class=name`); throws on a device no spec describes. */
export function cdiEnv(names: readonly string[], specDirs: readonly string[]): Record<string, string> {
  if (names.length === 0) return {};
  const specs = specDirs.flatMap(specsIn);
  const env: Record<string, string> = {};
  for (const qualified of names) {
    const [kind, name] = qualified.split('=');
    const device = specs
      .filter((s) => s.kind === kind)
      .flatMap((s) => s.devices ?? [])
      .find((d) => d.name === name);
    if (!device) throw new Error(`failed to inject CDI devices: unresolvable CDI devices ${qualified}`);
    for (const kv of device.containerEdits?.env ?? []) {
      const at = kv.indexOf('=');
      if (at > 0) env[kv.slice(0, at)] = kv.slice(at + 1);
    }
  }
  return env;
}
