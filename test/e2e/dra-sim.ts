/**
 * The simulator as a 1.36 control plane for DRA tests: its API server serving
 * `resource.k8s.io/v1`, its scheduler allocating claims, its controller manager running the
 * resourceclaim controller; no extender, no kubelet (nodes are objects, as on the real tier).
 */
import { type SimApiServer, startApiServer } from '../../sim/apiserver/api-server.js';
import { type SimControllerManager, startControllerManager } from '../../sim/controllers/controller-manager.js';
import { KubeClient } from '../../sim/kube-client.js';
import { parseSchedulerConfig } from '../../sim/scheduler/scheduler-config.js';
import { type SimScheduler, startScheduler } from '../../sim/scheduler/scheduler-loop.js';

export type DraSim = { client: KubeClient; api: SimApiServer; close: () => Promise<void> };

export async function startDraSim(): Promise<DraSim> {
  const api = await startApiServer({ kubernetesVersion: '1.36' });
  const client = new KubeClient(api.url);
  const config = parseSchedulerConfig({
    apiVersion: 'kubescheduler.config.k8s.io/v1',
    kind: 'KubeSchedulerConfiguration',
  });
  const scheduler: SimScheduler = startScheduler({ client, config, dynamicResources: true });
  const controllers: SimControllerManager = startControllerManager({ client, dynamicResources: true });
  return {
    client,
    api,
    close: async () => {
      await controllers.close();
      await scheduler.close();
      await api.close();
    },
  };
}
