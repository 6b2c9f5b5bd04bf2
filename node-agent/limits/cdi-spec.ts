/**
 * The container's cards (or whole MIG instances) as a CDI device (Container Device Interface, spec
 * 0.5.0). Allocate runs before the agent knows the pod, so it names the CDI device
 * `vcuda.io/allocation=<key>`; PreStartContainer, once the pod is known and its assignment
 * verified, writes the spec that says what that device is: the device nodes of the granted cards
 * (a MIG instance's parent and its two access nodes) and the visible-devices env.
 * The container runtime resolves CDI devices when it creates the container, after PreStart.
 * Without a spec (PreStart never ran, or refused) the runtime cannot resolve the device and does
 * not create the container.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export const CDI_KIND = 'vcuda.io/allocation';
export const CDI_VERSION = '0.5.0';

/** A card, or a shared MIG instance: its `MIG-` UUID, its parent's minor and its access nodes' minors. */
export type CdiCard = { uuid: string; minorNumber: number; capMinors?: readonly number[] | undefined };
export type CdiSettings = { devDir: string; setVisibleDevicesEnv: boolean };

export function cdiDeviceName(key: string): string {
  return `${CDI_KIND}=${key}`;
}

export function cdiSpecPath(cdiSpecDir: string, key: string): string {
  return join(cdiSpecDir, `vcuda.io-allocation-${key}.json`);
}

/**
 * A whole MIG instance for the container: its `MIG-` UUID, its parent's device minor, and the
 * minors of its GPU instance's and compute instance's access nodes (`/dev/nvidia-caps/nvidia-cap<N>`).
 */
export type CdiMigDevice = { uuid: string; parentMinor: number; capMinors: readonly number[] };

/** What one allocation's CDI device gives: the visible devices (UUIDs) and device nodes under /dev. */
type CdiEdits = { visible: readonly string[]; nodes: readonly string[] };

function specOf(key: string, edits: CdiEdits, s: CdiSettings) {
  const uuids = edits.visible.join(',');
  const env = s.setVisibleDevicesEnv ? [`NVIDIA_VISIBLE_DEVICES=${uuids}`, `CUDA_VISIBLE_DEVICES=${uuids}`] : [];
  return {
    cdiVersion: CDI_VERSION,
    kind: CDI_KIND,
    devices: [
      {
        name: key,
        containerEdits: {
          env,
          deviceNodes: edits.nodes.map((node) => ({
            path: `/dev/${node}`,
            hostPath: `${s.devDir}/${node}`,
            permissions: 'rw',
          })),
        },
      },
    ],
  };
}

/** The spec for one allocation of cards or shared MIG instances (pure): each parent node once, then the access nodes. */
export function buildCdiSpec(key: string, cards: readonly CdiCard[], s: CdiSettings) {
  const parents = [...new Set(cards.map((c) => `nvidia${c.minorNumber}`))];
  const caps = cards.flatMap((c) => (c.capMinors ?? []).map((m) => `nvidia-caps/nvidia-cap${m}`));
  return specOf(key, { visible: cards.map((c) => c.uuid), nodes: [...parents, ...caps] }, s);
}

/**
 * The spec for one allocation of whole MIG instances (pure): each parent's `/dev/nvidiaN` once,
 * each instance's two capability nodes, and the instances' `MIG-` UUIDs as the visible devices.
 */
export function buildMigCdiSpec(key: string, devices: readonly CdiMigDevice[], s: CdiSettings) {
  return buildCdiSpec(
    key,
    devices.map((d) => ({ uuid: d.uuid, minorNumber: d.parentMinor, capMinors: d.capMinors })),
    s,
  );
}

/** Atomic: the runtime never reads half a spec. */
export function writeCdiSpecFile(path: string, spec: object): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(spec, null, 2)}\n`, { mode: 0o644 });
  renameSync(tmp, path);
}

export function writeCdiSpec(cdiSpecDir: string, key: string, cards: readonly CdiCard[], s: CdiSettings): void {
  writeCdiSpecFile(cdiSpecPath(cdiSpecDir, key), buildCdiSpec(key, cards, s));
}

export function writeMigCdiSpec(
  cdiSpecDir: string,
  key: string,
  devices: readonly CdiMigDevice[],
  s: CdiSettings,
): void {
  writeCdiSpecFile(cdiSpecPath(cdiSpecDir, key), buildMigCdiSpec(key, devices, s));
}

export function removeCdiSpec(cdiSpecDir: string, key: string): void {
  removeCdiSpecFile(cdiSpecPath(cdiSpecDir, key));
}

export function removeCdiSpecFile(path: string): void {
  rmSync(path, { force: true });
}
