/**
 * What people try first on `npm start` (= `vcuda local`), with stock kubectl: a Deployment created
 * imperatively runs its 3 pods, `kubectl scale` to 5 runs 5, a Job completes, and
 * `kubectl get events --sort-by=.lastTimestamp` lists the controllers' events.
 * Skipped without kubectl.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hasKubectl, kubectl as kubectlWith, runVcuda } from './e2e-helpers.js';

const kubectl = (kubeconfig: string, ...args: string[]) => kubectlWith(kubeconfig, args);

/** Pods of `app` that are Running, by kubectl's own reading. */
function runningPods(kubeconfig: string, app: string): number {
  const out = kubectl(kubeconfig, 'get', 'pods', '-l', `app=${app}`, '-o', 'jsonpath={.items[*].status.phase}');
  return out.split(' ').filter((p) => p === 'Running').length;
}

describe.skipIf(!hasKubectl)('vcuda local runs Deployments and Jobs', () => {
  it('kubectl create deployment --replicas=3 runs 3 pods, scale to 5 runs 5, a Job completes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-workloads-'));
    writeFileSync(join(dir, 'cluster.yaml'), 'nodes:\n  - { count: 2, cards: 2 }\n');
    const args = ['local', '--port', '0', '--workload', 'none', '--cluster', join(dir, 'cluster.yaml')];
    const { child, output, exited } = runVcuda(args);
    try {
      await expect.poll(() => /ready in/.test(output()), { timeout: 150_000, interval: 250 }).toBe(true);
      const kubeconfig = /kubeconfig\s+(\/\S+kubeconfig)/.exec(output())![1]!;
      expect(kubectl(kubeconfig, 'create', 'deployment', 'web', '--image=cuda', '--replicas=3')).toContain(
        'deployment.apps/web created',
      );
      await expect.poll(() => runningPods(kubeconfig, 'web'), { timeout: 30_000, interval: 500 }).toBe(3);
      expect(kubectl(kubeconfig, 'scale', 'deployment', 'web', '--replicas=5')).toContain('deployment.apps/web scaled');
      await expect.poll(() => runningPods(kubeconfig, 'web'), { timeout: 30_000, interval: 500 }).toBe(5);
      expect(kubectl(kubeconfig, 'get', 'deployment', 'web')).toMatch(/web\s+5\/5\s+5\s+5\s/);

      kubectl(kubeconfig, 'create', 'job', 'hello', '--image=cuda', '--', 'echo', 'hi');
      await expect
        .poll(() => kubectl(kubeconfig, 'get', 'job', 'hello', '-o', 'jsonpath={.status.succeeded}'), {
          timeout: 30_000,
          interval: 500,
        })
        .toBe('1');
      const events = kubectl(kubeconfig, 'get', 'events', '--sort-by=.lastTimestamp');
      expect(events).toMatch(/ScalingReplicaSet\s+deployment\/web\s+Scaled up replica set web-\S+ from 0 to 3/);
      expect(events).toMatch(/Completed\s+job\/hello\s+Job completed/);
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
  }, 240_000);
});
