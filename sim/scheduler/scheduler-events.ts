/**
 * Events about pods from the simulated scheduler, written as kube-scheduler writes them (core/v1,
 * its name as the source): Scheduled, FailedScheduling, Preempted. Best effort, as there.
 */
import { randomBytes } from 'node:crypto';
import type { KubeClient, KubeObj } from '../kube-client.js';

export type SchedulerEvent = { reason: string; message: string; type: 'Normal' | 'Warning'; time: string };

export async function schedulerEvent(
  ctx: { client: KubeClient; schedulerName: string },
  pod: KubeObj,
  event: SchedulerEvent,
): Promise<void> {
  const { client, schedulerName } = ctx;
  const ns = pod.metadata.namespace ?? 'default';
  const involvedObject = {
    apiVersion: 'v1',
    kind: 'Pod',
    namespace: ns,
    name: pod.metadata.name,
    uid: pod.metadata.uid,
  };
  await client
    .create(`/api/v1/namespaces/${ns}/events`, {
      metadata: { name: `${pod.metadata.name}.${randomBytes(8).toString('hex')}`, namespace: ns },
      involvedObject,
      reason: event.reason,
      message: event.message,
      type: event.type,
      source: { component: schedulerName },
      firstTimestamp: event.time,
      lastTimestamp: event.time,
      count: 1,
      reportingComponent: schedulerName,
    })
    .catch(() => undefined);
}
