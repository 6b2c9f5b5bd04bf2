/** A minimal stored Pod for the simulated API server's store and watch tests: labelled, bound, Pending. */
export const storedPod = (namespace: string, name: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace, labels: { app: 'demo' } },
  spec: { nodeName: 'n1' },
  status: { phase: 'Pending' },
  ...extra,
});
