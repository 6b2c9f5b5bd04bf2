/**
 * After an agent restart: the containers already running with vcuda devices, from the kubelet's
 * PodResources and each pod's signed assignment. The signature still counts; the expiry does not
 * (a pod that has run for a day holds an assignment signed a day ago). Their files are already in
 * their allocation directories, named by the same device IDs; a container whose limit file (for
 * whole MIG instances: its CDI spec) is not there (the agent restarted between Allocate and
 * PreStart) is left to its PreStart.
 */
import { existsSync, readFileSync } from 'node:fs';
import {
  type ContainerGrant,
  decodeLimitConfig,
  migProfileOfResource,
  type ResourceNames,
  type VerifiedAssignment,
  vcudaAnnotations,
  verifyAssignment,
} from '../../contract/index.js';
import type { AgentLog } from '../agent-log.js';
import type { ListPodResourcesResponse } from '../kubelet/protocol.js';
import { cdiSpecPath } from '../limits/cdi-spec.js';
import { allocationKey, containerPaths } from '../limits/container-files.js';
import { deviceLimitOf } from './grant-limits.js';
import { type PodView, podKey } from './pod-view.js';
import type { CardDirectory, ContainerRecord, JwksSource, PodSource } from './ports.js';

/** Whether a PreStart wrote this limit file for this container (an Allocate alone leaves none). */
function writtenFor(configPath: string, podUid: string, container: string): boolean {
  try {
    const config = decodeLimitConfig(readFileSync(configPath));
    return config.podUid === podUid && config.containerName === container;
  } catch {
    // Missing or unreadable: no PreStart wrote it for this container, which is the answer.
    return false;
  }
}

type RelearnDeps = {
  nodeName: string;
  names: ResourceNames;
  containersDir: string;
  cdiSpecDir: string;
  pods: PodSource;
  jwks: JwksSource;
  cards: CardDirectory;
  nowMs: () => number;
  log: Pick<AgentLog, 'warn'>;
  listPodResources: () => Promise<ListPodResourcesResponse>;
  isKnown: (key: string) => boolean;
  /** The `MIG-` UUID made for a dynamic grant's placement key (absent: no dynamic MIG here). */
  migUuidOf?: (placementKey: string) => string | undefined;
};

/**
 * A container of whole MIG instances whose PreStart wrote its CDI spec (the only file it has):
 * the instances its grant names.
 */
function relearnMig(
  d: RelearnDeps,
  pod: PodView,
  container: string,
  grant: ContainerGrant,
  deviceIds: readonly string[],
): ContainerRecord | undefined {
  const paths = containerPaths(d.containersDir, allocationKey(deviceIds));
  if (d.isKnown(paths.key) || !existsSync(cdiSpecPath(d.cdiSpecDir, paths.key))) return undefined;
  return {
    podUid: pod.uid,
    namespace: pod.namespace,
    podName: pod.name,
    container,
    isInit: grant.isInit,
    deviceIds: [...deviceIds],
    devices: [],
    migDevices: grant.cards.map((g) => (g.mig?.dynamic ? (d.migUuidOf?.(g.uuid) ?? g.uuid) : g.uuid)),
    paths,
    allocatedAtMs: d.nowMs(),
    confirmed: true,
  };
}

export async function relearnContainers(d: RelearnDeps): Promise<ContainerRecord[]> {
  await d.pods.refresh();
  const byKey = new Map(d.pods.pods().map((p) => [podKey(p), p]));
  const listed = await d.listPodResources();
  const out: ContainerRecord[] = [];
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
      d.log.warn(
        { err, pod: podKey(pod) },
        `rebuild: pod ${podKey(pod)}: assignment not verified; its containers are not re-learned`,
      );
      continue;
    }
    for (const c of p.containers) {
      const grant = assignment.containers.find((g) => g.name === c.name);
      const mig = c.devices.find((x) => migProfileOfResource(d.names, x.resource_name) !== undefined);
      if (grant && mig) {
        const record = relearnMig(d, pod, c.name, grant, mig.device_ids);
        if (record) out.push(record);
        continue;
      }
      const dev = c.devices.find((x) => x.resource_name === d.names.core);
      if (!dev || !grant) continue;
      const paths = containerPaths(d.containersDir, allocationKey(dev.device_ids));
      if (d.isKnown(paths.key) || !writtenFor(paths.configPath, pod.uid, c.name)) continue;
      const devices = grant.cards.flatMap((g) => {
        const card = d.cards.cardByUuid(g.uuid);
        return card ? [deviceLimitOf(g, grant, card.index)] : [];
      });
      out.push({
        podUid: pod.uid,
        namespace: pod.namespace,
        podName: pod.name,
        container: c.name,
        isInit: grant.isInit,
        deviceIds: [...dev.device_ids],
        devices,
        paths,
        allocatedAtMs: d.nowMs(),
        confirmed: true,
      });
    }
  }
  return out;
}
