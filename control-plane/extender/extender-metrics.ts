/** The extender's Prometheus metrics, registered on the registry the process serves at /metrics. */
import { Counter, Histogram, type Registry } from 'prom-client';

export type ExtenderMetrics = {
  requestSeconds: Histogram<'verb'>;
  nodeRefusals: Counter<'reason'>;
  podsUnschedulable: Counter;
  binds: Counter<'result'>;
  bindConflicts: Counter<'code'>;
  nudges: Counter;
};

export function createExtenderMetrics(registry: Registry): ExtenderMetrics {
  const registers = [registry];
  return {
    requestSeconds: new Histogram({
      name: 'vcuda_extender_request_duration_seconds',
      help: 'Time to answer kube-scheduler, per extender verb',
      labelNames: ['verb'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    nodeRefusals: new Counter({
      name: 'vcuda_extender_node_refusals_total',
      help: 'Nodes refused by filter, by reason (insufficient-memory, insufficient-core, stale-heartbeat, ...)',
      labelNames: ['reason'],
      registers,
    }),
    podsUnschedulable: new Counter({
      name: 'vcuda_extender_pods_unschedulable_total',
      help: 'Filter calls where no offered node could hold the pod',
      registers,
    }),
    binds: new Counter({
      name: 'vcuda_extender_binds_total',
      help: 'Bind calls by result: bound, conflict (lost a race or quota; kube-scheduler retries), error',
      labelNames: ['result'],
      registers,
    }),
    bindConflicts: new Counter({
      name: 'vcuda_extender_bind_conflicts_total',
      help: 'Binds refused by the ledger or by a changed node, by code (capacity-conflict, quota-exceeded)',
      labelNames: ['code'],
      registers,
    }),
    nudges: new Counter({
      name: 'vcuda_extender_nudges_total',
      help: 'Pending pods nudged back into the scheduling queue after GPU capacity freed',
      registers,
    }),
  };
}
