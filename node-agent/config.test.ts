import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ValidationError } from '../contract/index.js';
import { parseConfig } from './config.js';

describe('node agent config', () => {
  it('fills defaults and freezes the result', () => {
    const c = parseConfig({ env: { NODE_NAME: 'gpu-1' } });
    expect(c).toMatchObject({
      nodeName: 'gpu-1',
      resourceDomain: 'nvidia.com',
      memoryUnitMiB: 1,
      memoryAdvertise: 'auto',
      kubelet: {
        devicePluginDir: '/var/lib/kubelet/device-plugins',
        podResourcesSocket: '/var/lib/kubelet/pod-resources/kubelet.sock',
      },
      paths: { containersDir: '/run/vcuda/containers', jwksPath: '/etc/vcuda/jwks/jwks.json' },
      heartbeatPeriodMs: 30_000,
    });
    expect(Object.isFrozen(c.paths)).toBe(true);
  });

  it('applies file, then env, then flags', () => {
    const c = parseConfig({
      file: { nodeName: 'from-file', memoryUnitMiB: 256, paths: { containersDir: '/x' } },
      env: { NODE_NAME: 'from-env', VCUDA_RESOURCE_DOMAIN: 'tencent.com' },
      flags: { nodeName: 'from-flag' },
    });
    expect([c.nodeName, c.resourceDomain, c.memoryUnitMiB, c.paths.containersDir]).toEqual([
      'from-flag',
      'tencent.com',
      256,
      '/x',
    ]);
  });

  it('names the field and the rule of every bad value', () => {
    let err: unknown;
    try {
      parseConfig({ file: { memoryUnitMiB: 0, memoryAdvertise: 'maybe' } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    const paths = (err as ValidationError).errors.map((e) => e.path).sort();
    expect(paths).toEqual(['memoryAdvertise', 'memoryUnitMiB', 'nodeName']);
  });

  it('keeps cards for dynamic MIG by index or all, and names a bad entry', () => {
    expect(parseConfig({ env: { NODE_NAME: 'n' } }).mig).toMatchObject({
      dynamicCards: [],
      checkpointPath: '/run/vcuda/dynamic-mig.json',
    });
    expect(parseConfig({ env: { NODE_NAME: 'n', VCUDA_MIG_DYNAMIC_CARDS: '0, 2' } }).mig.dynamicCards).toEqual([0, 2]);
    expect(parseConfig({ env: { NODE_NAME: 'n', VCUDA_MIG_DYNAMIC_CARDS: 'all' } }).mig.dynamicCards).toBe('all');
    expect(() => parseConfig({ env: { NODE_NAME: 'n', VCUDA_MIG_DYNAMIC_CARDS: '0,gpu1' } })).toThrow(
      'mig.dynamicCards: must be "all" or a list of card indices (integers, 0 or more)',
    );
  });

  it('refuses a resource domain Kubernetes would refuse, naming the field, before anything starts', () => {
    expect(() => parseConfig({ env: { NODE_NAME: 'n', VCUDA_RESOURCE_DOMAIN: 'kubernetes.io' } })).toThrow(
      'resourceDomain: resource domain "kubernetes.io" is reserved',
    );
  });

  it("accepts the DaemonSet's ConfigMap as shipped", () => {
    const docs = parseAllDocuments(readFileSync('deploy/base/node-agent-daemonset.yaml', 'utf8')).map((d) => d.toJS());
    const cm = docs.find((d) => d.kind === 'ConfigMap');
    const file = parseAllDocuments(cm.data['config.yaml'])[0]?.toJS();
    const c = parseConfig({ file, env: { NODE_NAME: 'n' } });
    expect(c.paths.driverLibraries.length).toBeGreaterThan(0);
    const ds = docs.find((d) => d.kind === 'DaemonSet');
    const mounts = ds.spec.template.spec.containers[0].volumeMounts.map((m: { mountPath: string }) => m.mountPath);
    expect(mounts).toEqual(
      expect.arrayContaining([
        c.kubelet.devicePluginDir,
        '/var/lib/kubelet/pod-resources',
        '/var/lib/vcuda',
        '/run/vcuda',
        '/etc/vcuda/jwks',
      ]),
    );
  });
});
