/**
 * GetPreferredAllocation's hint (pure): the cards (core group → core) of the GPU containers on this
 * node that still wait for devices of this size, when they all want the same cards. Several
 * waiting containers that want different cards give no hint: the kubelet does not say which pod it
 * is choosing for. Only cosmetic for safety, since the signed grant decides the cards; it makes
 * PodResources show the cards a container really uses where that is knowable.
 */
import type { PodView } from './pod-view.js';

export function steeringHint(input: {
  coreDevices: number;
  nodeName: string;
  pods: readonly PodView[];
  isStarted: (podUid: string, container: string) => boolean;
  coreGroup: (uuid: string) => string | undefined;
}): Map<string, number> {
  const wanted: string[] = [];
  let hint = new Map<string, number>();
  for (const pod of input.pods) {
    if (pod.nodeName !== input.nodeName || pod.isFinished) continue;
    for (const c of pod.gpuContainers) {
      if (c.core !== input.coreDevices || input.isStarted(pod.uid, c.name)) continue;
      const grant = pod.claimedGrants.find((g) => g.name === c.name && g.isInit === c.isInit);
      const perCard = new Map<string, number>();
      for (const g of grant?.cards ?? []) {
        const group = input.coreGroup(g.uuid);
        if (group !== undefined) perCard.set(group, g.core);
      }
      const key = [...perCard.entries()].sort((a, b) => a[0].localeCompare(b[0])).join(';');
      if (!wanted.includes(key)) wanted.push(key);
      hint = perCard;
    }
  }
  return wanted.length === 1 ? hint : new Map();
}

/**
 * The same hint for whole MIG instances of `profile`: the instances (MIG UUIDs) every waiting
 * container asking `count` of them wants, when they all want the same ones; else none.
 */
export function migSteeringHint(input: {
  profile: string;
  count: number;
  nodeName: string;
  pods: readonly PodView[];
  isStarted: (podUid: string, container: string) => boolean;
}): string[] {
  const wanted = new Set<string>();
  let hint: string[] = [];
  for (const pod of input.pods) {
    if (pod.nodeName !== input.nodeName || pod.isFinished) continue;
    for (const c of pod.gpuContainers) {
      if (c.mig?.profile !== input.profile || c.mig.count !== input.count || input.isStarted(pod.uid, c.name)) continue;
      const grant = pod.claimedGrants.find((g) => g.name === c.name && g.isInit === c.isInit);
      hint = (grant?.cards ?? []).filter((g) => g.mig?.profile === input.profile).map((g) => g.uuid);
      wanted.add([...hint].sort().join(','));
    }
  }
  return wanted.size === 1 ? hint : [];
}
