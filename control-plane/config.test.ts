import { describe, expect, it } from 'vitest';
import { ValidationError } from '../contract/index.js';
import { loadControlPlaneConfig, parseConfigFile } from './config.js';
import { flagsToConfig } from './main.js';

describe('control plane config', () => {
  it('fills defaults', () => {
    const c = loadControlPlaneConfig({});
    expect(c).toMatchObject({
      port: 8080,
      httpsPort: 8443,
      placement: { default: 'binpack' },
      kube: { mode: 'in-cluster' },
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('takes flags over env over file', () => {
    const file = parseConfigFile('port: 1000\nclusterName: from-file\nplacement:\n  default: spread\n', 'cp.yaml');
    const c = loadControlPlaneConfig({
      file,
      env: { VCUDA_PORT: '2000', VCUDA_CLUSTER_NAME: 'from-env', DATABASE_URL: 'postgres://x@h/db' },
      flags: flagsToConfig({ port: 3000 }),
    });
    expect(c.port).toBe(3000);
    expect(c.clusterName).toBe('from-env');
    expect(c.placement.default).toBe('spread');
    expect(c.database.url).toBe('postgres://x@h/db');
  });

  it.each([
    { name: 'bad placement', flags: { placement: { default: 'random' } }, field: 'placement.default' },
    { name: 'bad port', flags: { port: 70000 }, field: 'port' },
    { name: 'reserved domain', flags: { resourceDomain: 'kubernetes.io' }, field: 'resourceDomain' },
    { name: 'file keys without a file', flags: { signingKeys: { source: 'file' } }, field: 'signingKeys.file' },
    { name: 'secret keys without a cluster', flags: { kube: { mode: 'none' } }, field: 'signingKeys.source' },
    {
      name: 'token review without a cluster',
      flags: { kube: { mode: 'none' }, signingKeys: { source: 'ephemeral' }, api: { auth: 'tokenreview' } },
      field: 'api.auth',
    },
    { name: 'no usage writers', flags: { api: { usageWriters: [] } }, field: 'api.usageWriters' },
    {
      name: 'a ledger deadline not well inside the webhook timeout',
      flags: { database: { callTimeoutMs: 2000 }, webhook: { registration: { timeoutSeconds: 3 } } },
      field: 'database.callTimeoutMs',
    },
    { name: 'no dashboard streams', flags: { dashboard: { maxStreams: 0 } }, field: 'dashboard.maxStreams' },
  ])('names the field: $name', ({ flags, field }) => {
    try {
      loadControlPlaneConfig({ flags });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).errors.map((e) => e.path)).toContain(field);
    }
  });

  it('reviews usage writers by token with a cluster, names the node agents, and trusts the port without one', () => {
    expect(loadControlPlaneConfig({ flags: { namespace: 'gpu-system' } }).api).toEqual({
      auth: 'tokenreview',
      usageWriters: ['system:serviceaccount:gpu-system:vcuda-node-agent'],
      tokenAudiences: [],
    });
    const local = loadControlPlaneConfig({ flags: { kube: { mode: 'none' }, signingKeys: { source: 'ephemeral' } } });
    expect(local.api.auth).toBe('none');
    expect(loadControlPlaneConfig({ env: { VCUDA_API_AUTH: 'none' } }).api.auth).toBe('none');
  });

  it('bounds every wait on the ledger and the dashboard by default, and reads them from the environment', () => {
    const c = loadControlPlaneConfig({});
    expect(c.database).toMatchObject({ connectTimeoutSeconds: 3, callTimeoutMs: 1000, maxConnections: 10 });
    expect(c.dashboard).toMatchObject({ maxStreams: 64, idleForMinutes: 30 });
    const env = loadControlPlaneConfig({
      env: {
        VCUDA_DB_CALL_TIMEOUT_MS: '500',
        VCUDA_DB_CONNECT_TIMEOUT_SECONDS: '2',
        VCUDA_DASHBOARD_MAX_STREAMS: '8',
        VCUDA_DASHBOARD_IDLE_FOR_MINUTES: '2',
      },
    });
    expect(env.database).toMatchObject({ callTimeoutMs: 500, connectTimeoutSeconds: 2 });
    expect(env.dashboard).toMatchObject({ maxStreams: 8, idleForMinutes: 2 });
  });

  it('reads numbers from the environment and refuses non-numbers', () => {
    expect(loadControlPlaneConfig({ env: { VCUDA_HEARTBEAT_STALE_SECONDS: '30' } }).heartbeatStaleSeconds).toBe(30);
    expect(() => loadControlPlaneConfig({ env: { VCUDA_PORT: 'eighty' } })).toThrow(/port/);
  });
});
