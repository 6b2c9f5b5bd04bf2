/**
 * The container's cards as a CDI device (Container Device Interface, spec 0.5.0). Allocate runs
 * before the agent knows the pod, so it names the CDI device `vcuda.io/allocation=<key>`;
 * PreStartContainer, once the pod is known and its assignment verified, writes the spec that
 * says what that device is: the device nodes of the granted cards and the visible-devices env.
 * The container runtime resolves CDI devices when it creates the container, after PreStart.
 * Without a spec (PreStart never ran, or refused) the runtime cannot resolve the device and does
 * not create the container.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export const CDI_KIND = 'vcuda.io/allocation';
export const CDI_VERSION = '0.5.0';

export type CdiCard = { uuid: string; minorNumber: number };
export type CdiSettings = { devDir: string; setVisibleDevicesEnv: boolean };

export function cdiDeviceName(key: string): string {
  return `${CDI_KIND}=${key}`;
}

export function cdiSpecPath(cdiSpecDir: string, key: string): string {
  return join(cdiSpecDir, `vcuda.io-allocation-${key}.json`);
}

/** The spec for one allocation (pure). */
export function buildCdiSpec(key: string, cards: readonly CdiCard[], s: CdiSettings) {
  const uuids = cards.map((c) => c.uuid).join(',');
  const env = s.setVisibleDevicesEnv ? [`NVIDIA_VISIBLE_DEVICES=${uuids}`, `CUDA_VISIBLE_DEVICES=${uuids}`] : [];
  return {
    cdiVersion: CDI_VERSION,
    kind: CDI_KIND,
    devices: [
      {
        name: key,
        containerEdits: {
          env,
          deviceNodes: cards.map((c) => ({
            path: `/dev/nvidia${c.minorNumber}`,
            hostPath: `${s.devDir}/nvidia${c.minorNumber}`,
            permissions: 'rw',
          })),
        },
      },
    ],
  };
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

export function removeCdiSpec(cdiSpecDir: string, key: string): void {
  removeCdiSpecFile(cdiSpecPath(cdiSpecDir, key));
}

export function removeCdiSpecFile(path: string): void {
  rmSync(path, { force: true });
}
