/**
 * What the simulated API server answers where a real cluster would reach a kubelet or a metrics
 * server the simulator does not have (`kubectl exec`, `attach`, `port-forward`, `top`): a Status
 * naming what local mode offers instead, rather than a bare "not found".
 */
import { ApiError } from './api-status.js';

export type UnavailableFeature = 'exec' | 'attach' | 'portforward' | 'metrics';

/** The default hints; `vcuda local` passes its own with the dashboard's URL in them. */
export function unavailableMessage(feature: UnavailableFeature, dashboardUrl?: string): string {
  const dashboard = dashboardUrl ? `the dashboard at ${dashboardUrl}` : 'the dashboard';
  switch (feature) {
    case 'exec':
    case 'attach':
      return (
        `vcuda local runs each container as a host process, not in a container runtime: kubectl ${feature} is not available. ` +
        "Instead: kubectl logs POD (the demo pods print their CUDA program: total_mib is the pod's memory limit), " +
        `kubectl describe pod POD, kubectl get events, and ${dashboard} for its card and usage`
      );
    case 'portforward':
      return (
        'vcuda local has no pod network: kubectl port-forward is not available. ' +
        `Instead: ${dashboard}, its /metrics and /api/v1/... on the same port, which vcuda local prints at start`
      );
    case 'metrics':
      return (
        'vcuda local runs no metrics-server: kubectl top is not available. ' +
        `Instead: ${dashboard} (measured GPU use per pod and namespace under Reports), its /metrics, ` +
        'and vcuda report gpu-hours --url URL'
      );
  }
}

/** The 503 a request for `feature` gets. */
export function unavailable(feature: UnavailableFeature, dashboardUrl?: string): ApiError {
  const message = unavailableMessage(feature, dashboardUrl);
  return new ApiError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: 'ServiceUnavailable',
    code: 503,
  });
}

/** The feature a request route asks for that the simulator cannot serve, if any. */
export function unavailableFeatureOf(group: string, subresource: string | undefined): UnavailableFeature | undefined {
  if (group === 'metrics.k8s.io') return 'metrics';
  if (subresource === 'exec' || subresource === 'attach' || subresource === 'portforward') return subresource;
  return undefined;
}
