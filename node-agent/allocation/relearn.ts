/**
 * After an agent restart: the containers already running with vcuda devices, from the kubelet's
 * PodResources and each pod's signed assignment. The signature still counts; the expiry does not
 * (a pod that has run for a day holds an assignment signed a day ago).
 */
import {
  type ResourceNames,
  type VerifiedAssignment,
  vcudaAnnotations,
  verifyAssignment,
} from '../../contract/index.js';
import type { ListPodResourcesResponse } from '../device-plugin/protocol.js';
import { containerPaths } from '../limits/container-files.js';
import type { CardDirectory, ContainerRecord } from './allocator.js';
import { deviceLimitOf, grantCore } from './grant-limits.js';
import { type GpuContainerView, type PodView, podKey } from './pod-view.js';
import type { JwksSource, PodSource } from './ports.js';

export type Relearned = { pod: PodView; container: GpuContainerView; record: ContainerRecord };

export async function relearnContainers(d: {
  nodeName: string;
  names: ResourceNames;
  containersDir: string;
  pods: PodSource;
  jwks: JwksSource;
  cards: CardDirectory;
  nowMs: () => number;
  log: { warn: (m: string) => void };
  listPodResources: () => Promise<ListPodResourcesResponse>;
  isKnown: (podUid: string, container: string) => boolean;
}): Promise<Relearned[]> {
  await d.pods.refresh();
  const byKey = new Map(d.pods.pods().map((p) => [podKey(p), p]));
  const listed = await d.listPodResources();
  const out: Relearned[] = [];
  for (const p of listed.pod_resources) {
    const pod = byKey.get(podKey(p));
    const token = pod?.annotations[vcudaAnnotations.assignment];
    if (!pod || !token) continue;
    let assignment: VerifiedAssignment;
    try {
      assignment = await verifyAssignment(token, await d.jwks(), {
        podUid: pod.uid,
        node: d.nodeName,
        nowSeconds: Math.floor(d.nowMs() / 1000),
        ignoreExpiry: true,
      });
    } catch (err) {
      d.log.warn(`rebuild: pod ${podKey(pod)}: ${(err as Error).message}`);
      continue;
    }
    for (const c of p.containers) {
      const dev = c.devices.find((x) => x.resource_name === d.names.core);
      const grant = assignment.containers.find((g) => g.name === c.name);
      if (!dev || !grant || d.isKnown(pod.uid, c.name)) continue;
      const devices = grant.cards.flatMap((g) => {
        const card = d.cards.cardByUuid(g.uuid);
        return card ? [deviceLimitOf(g, grant, card.index)] : [];
      });
      out.push({
        pod,
        container: { name: c.name, isInit: grant.isInit, core: grantCore(grant) },
        record: {
          podUid: pod.uid,
          namespace: pod.namespace,
          podName: pod.name,
          container: c.name,
          isInit: grant.isInit,
          deviceIds: [...dev.device_ids],
          devices,
          paths: containerPaths(d.containersDir, pod.uid, c.name),
          allocatedAtMs: d.nowMs(),
          confirmed: true,
        },
      });
    }
  }
  return out;
}
