/**
 * Runs a program as a container runtime would run it with a CDI spec's edits applied: in a user
 * and mount namespace (`unshare -rm`, no root needed), /etc, /usr and /run get writable overlays,
 * every mount of the spec is bound at its container path (the preload file last, so only the
 * program itself starts with it), and the program starts with the spec's env. Device nodes are
 * not created: the fake driver enumerates the cards whose nodes the devices inject
 * (`FAKEGPU_VISIBLE_DEVICES`, as the simulator's node does for the NVIDIA runtime).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type CdiEdits = {
  env?: string[];
  deviceNodes?: { path: string }[];
  mounts?: { hostPath: string; containerPath: string; options?: string[] }[];
};

const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/** Whether this machine lets an unprivileged user make a mount namespace with overlays. */
export function canRunCdiContainers(): boolean {
  const dir = mkdtempSync(join(tmpdir(), 'cdi-probe-'));
  try {
    const script = `mount -t overlay o -o lowerdir=/etc,upperdir=${dir}/u,workdir=${dir}/w /etc`;
    spawnSync('mkdir', ['-p', join(dir, 'u'), join(dir, 'w')]);
    return spawnSync('unshare', ['-rm', 'sh', '-c', script], { timeout: 10_000 }).status === 0;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function mountScript(edits: CdiEdits, scratch: string): string[] {
  const lines = ['set -e'];
  for (const [i, root] of ['/etc', '/usr', '/run'].entries()) {
    const up = join(scratch, `u${i}`);
    const work = join(scratch, `w${i}`);
    lines.push(
      `mkdir -p ${up} ${work}`,
      `mount -t overlay o -o lowerdir=${root},upperdir=${up},workdir=${work} ${root}`,
    );
  }
  const mounts = [...(edits.mounts ?? [])].sort(
    (a, b) => Number(a.containerPath === '/etc/ld.so.preload') - Number(b.containerPath === '/etc/ld.so.preload'),
  );
  for (const m of mounts) {
    const target = quote(m.containerPath);
    if (statSync(m.hostPath).isDirectory()) lines.push(`mkdir -p ${target}`);
    else lines.push(`mkdir -p "$(dirname ${target})"`, `touch ${target}`);
    lines.push(`mount --bind ${quote(m.hostPath)} ${target}`);
  }
  return lines;
}

/** The fake driver's stand-in for the card device nodes injected: their minors, or `none`. */
function visibleCards(devices: readonly CdiEdits[]): string {
  const minors = devices.flatMap((d) =>
    (d.deviceNodes ?? []).flatMap((n) => /^\/dev\/nvidia(\d+)$/.exec(n.path)?.[1] ?? []),
  );
  return minors.length > 0 ? minors.join(',') : 'none';
}

/**
 * Runs `argv` in a container with the spec's edits and those of the injected `devices`; `env` is
 * the runtime's own (the fake driver's knobs), under the spec's.
 */
export function runInCdiContainer(
  edits: CdiEdits,
  devices: readonly CdiEdits[],
  argv: string[],
  env: Record<string, string>,
) {
  const scratch = mkdtempSync(join(tmpdir(), 'cdi-'));
  try {
    const lines = [...mountScript(edits, scratch), ...(edits.env ?? []).map((e) => `export ${quote(e)}`)];
    lines.push(`export FAKEGPU_VISIBLE_DEVICES=${visibleCards(devices)}`);
    lines.push(`exec ${argv.map(quote).join(' ')}`);
    return spawnSync('unshare', ['-rm', 'sh', '-c', lines.join('\n')], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env },
      encoding: 'utf8',
      timeout: 60_000,
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
