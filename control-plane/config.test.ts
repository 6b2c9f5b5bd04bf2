import { describe, expect, it } from 'vitest';
import { ValidationError } from '../contract/index.js';
import { redactConfig } from '../contract/redact.js';
import { webhookConfigSchema } from '../webhooks/config.js';
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
    {
      name: 'self-kept extender certificates without a cluster',
      flags: {
        kube: { mode: 'none' },
        signingKeys: { source: 'ephemeral' },
        extender: { certificates: { mode: 'self' } },
      },
      field: 'extender.certificates.mode',
    },
    {
      name: 'extender files without the client CA',
      flags: { extender: { certificates: { mode: 'files', certFile: '/c', keyFile: '/k' } } },
      field: 'extender.certificates.certFile',
    },
    { name: 'no extender clients', flags: { extender: { allowedClients: [] } }, field: 'extender.allowedClients' },
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
      maxBodyBytes: 16 * 1024 * 1024,
      usageSamplePeriodSeconds: 10,
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

  it('serves the extender on 8444 to vcuda-scheduler, certificates kept in a Secret with a cluster and in memory without', () => {
    const c = loadControlPlaneConfig({});
    expect(c.extender).toMatchObject({ port: 8444, allowedClients: ['vcuda-scheduler'] });
    expect(c.extender.certificates).toMatchObject({ mode: 'self', secretName: 'vcuda-extender-tls' });
    // 5,000 node names of 253 characters, quoted and comma-separated, plus a 3 MiB pod.
    expect(c.extender.maxBodyBytes).toBeGreaterThan(5000 * 256 + 3 * 1024 * 1024);
    const local = loadControlPlaneConfig({ flags: { kube: { mode: 'none' }, signingKeys: { source: 'ephemeral' } } });
    expect(local.extender.certificates.mode).toBe('ephemeral');
    expect(loadControlPlaneConfig({ env: { VCUDA_EXTENDER_PORT: '9444' } }).extender.port).toBe(9444);
  });

  it('reads the webhook URL, scheduler name and privileged users from the environment', () => {
    const c = loadControlPlaneConfig({
      env: {
        VCUDA_WEBHOOK_URL: 'https://cp.example:8443',
        VCUDA_WEBHOOK_SCHEDULER_NAME: 'vcuda-scheduler',
        VCUDA_WEBHOOK_PRIVILEGED_USERNAMES: 'system:serviceaccount:vcuda-system:vcuda-control-plane, kubernetes-admin',
      },
    });
    expect(c.webhook.registration?.url).toBe('https://cp.example:8443');
    expect(c.webhook.schedulerName).toBe('vcuda-scheduler');
    expect(c.webhook.privilegedUsernames).toEqual([
      'system:serviceaccount:vcuda-system:vcuda-control-plane',
      'kubernetes-admin',
    ]);
  });

  it('reads DRA mode for pods from the environment, off by default', () => {
    expect(webhookConfigSchema.parse(loadControlPlaneConfig({}).webhook).dra.convertPods).toBe(false);
    const c = loadControlPlaneConfig({
      env: { VCUDA_WEBHOOK_DRA_CONVERT_PODS: 'true', VCUDA_WEBHOOK_DRA_MODE_LABEL: 'gpu.vcuda.io/mode' },
    });
    expect(webhookConfigSchema.parse(c.webhook).dra).toEqual({
      convertPods: true,
      modeLabel: 'gpu.vcuda.io/mode',
      modeValue: 'dra',
      templateTimeoutMs: 2000,
    });
  });

  it('reads numbers from the environment and refuses non-numbers', () => {
    expect(loadControlPlaneConfig({ env: { VCUDA_HEARTBEAT_STALE_SECONDS: '30' } }).heartbeatStaleSeconds).toBe(30);
    expect(() => loadControlPlaneConfig({ env: { VCUDA_PORT: 'eighty' } })).toThrow(/port/);
  });

  it('prints a config with the database password redacted', () => {
    const c = loadControlPlaneConfig({ env: { DATABASE_URL: 'postgres://vcuda:hunter2@db:5432/ledger' } });
    const printed = JSON.stringify(redactConfig(c));
    expect(printed).toContain('"url":"postgres://vcuda:****@db:5432/ledger"');
    expect(printed).not.toContain('hunter2');
    expect(c.database.url).toBe('postgres://vcuda:hunter2@db:5432/ledger');
    // A leading space still connects (drivers trim it), so it must not unmask the password.
    const spaced = loadControlPlaneConfig({ env: { DATABASE_URL: ' postgres://vcuda:S3cretPW@db:5432/ledger' } });
    expect(JSON.stringify(redactConfig(spaced))).not.toContain('S3cretPW');
  });
});
