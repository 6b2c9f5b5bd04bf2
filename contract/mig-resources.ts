/**
 * Whole MIG instances as extended resources, named as NVIDIA's device plugin names them under its
 * `mixed` strategy, so manifests written for it run unchanged: one resource per GPU-instance
 * profile, `<domain>/mig-<g>g.<mem>gb`. A resource name may not hold the `+` of the
 * media-extension profiles (`1g.10gb+me`), so it is written `.` there (`nvidia.com/mig-1g.10gb.me`),
 * as NVIDIA's plugin writes it. Pure names and rules; nothing here knows a card.
 */
import type { ResourceNames } from './names.js';

/** NVIDIA's profile names: `1g.10gb`, `3g.40gb`, `1g.10gb+me`. */
export const MIG_PROFILE_PATTERN = /^[0-9]+g\.[0-9]+gb(\+[a-z]+)?$/;
export const MIG_PROFILE_RULE = 'a MIG profile name such as 3g.40gb or 1g.10gb+me';

/** What follows `<domain>/mig-` in a resource name: the profile, its `+` written `.`. */
const RESOURCE_TAIL = /^([0-9]+g\.[0-9]+gb)(?:\.([a-z]+))?$/;

/** The extended resource that serves whole instances of `profile` (`3g.40gb` → `nvidia.com/mig-3g.40gb`). */
export function migResourceName(names: Pick<ResourceNames, 'migPrefix'>, profile: string): string {
  return `${names.migPrefix}${profile.replace('+', '.')}`;
}

/** The profile a resource name serves (`nvidia.com/mig-1g.10gb.me` → `1g.10gb+me`); undefined for any other name. */
export function migProfileOfResource(names: Pick<ResourceNames, 'migPrefix'>, key: string): string | undefined {
  if (!key.startsWith(names.migPrefix)) return undefined;
  const m = RESOURCE_TAIL.exec(key.slice(names.migPrefix.length));
  if (!m) return undefined;
  return m[2] ? `${m[1]}+${m[2]}` : m[1];
}

/** Whether a resource name is a MIG resource of this domain, well-formed or not (for refusals that name it). */
export function isMigResourceKey(names: Pick<ResourceNames, 'migPrefix'>, key: string): boolean {
  return key.startsWith(names.migPrefix);
}

/**
 * The GPU-instance profiles of the cards vcuda knows MIG on (NVIDIA MIG user guide, "Supported MIG
 * Profiles"; the fake driver models the same two cards): H100 80GB and H200 141GB. kube-scheduler
 * sends a pod to the extender only when it names one of its `managedResources` exactly, so the
 * scheduler configuration lists these; a card with other profiles needs its names added there.
 */
export const KNOWN_MIG_PROFILES: readonly string[] = Object.freeze([
  // H100 80GB
  '1g.10gb',
  '1g.10gb+me',
  '1g.20gb',
  '2g.20gb',
  '3g.40gb',
  '4g.40gb',
  '7g.80gb',
  // H200 141GB
  '1g.18gb',
  '1g.18gb+me',
  '1g.35gb',
  '2g.35gb',
  '3g.71gb',
  '4g.71gb',
  '7g.141gb',
]);
