/**
 * vcuda's DRA pieces set up on the real Kubernetes 1.36 control plane (test/support/kubernetes-136.ts)
 * for tests and benchmarks: the DeviceClass, a Ready node publishing its cards' ResourceSlice as the
 * node agent builds it, and the ledger's charge hook served over HTTPS and registered as the control
 * plane registers it.
 */
import { Hono } from 'hono';
import { DEFAULT_DRA_DRIVER } from '../../contract/index.js';
import { claimChargeRoute } from '../../control-plane/claim-ledger/claim-charge-route.js';
import { type ClaimLedgerOptions, createClaimLedger } from '../../control-plane/claim-ledger/claim-ledger.js';
import type { PartitionNode } from '../../control-plane/claim-ledger/claim-partitions.js';
import { type Listening, listen } from '../../control-plane/starters/http-listener.js';
import { buildResourceSlices, type SliceCard } from '../../node-agent/dra/resource-slice.js';
import type { GpuCard } from '../../node-agent/nvml/gpu-source.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { buildClaimWebhookConfigurations } from '../../webhooks/claim-registration.js';
import { registrationConfigSchema } from '../../webhooks/config.js';
import type { Kubernetes136 } from './kubernetes-136.js';
import { nodeObject, readyNodeStatus } from './ready-node.js';

export const DRIVER = DEFAULT_DRA_DRIVER;

/** kubectl as the admin, failing loudly; `input` is sent as JSON on stdin. */
export function adminKubectl(k8s: Kubernetes136) {
  return async (args: readonly string[], input?: object): Promise<string> => {
    const r = await k8s.kubectl(args, input ? { input: JSON.stringify(input) } : {});
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
}

/** Polls `probe` every 500 ms until it gives a value, failing past `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

export async function createDeviceClass(k8s: Kubernetes136): Promise<void> {
  await adminKubectl(k8s)(['apply', '-f', '-'], {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'DeviceClass',
    metadata: { name: DRIVER },
    spec: { selectors: [{ cel: { expression: `device.driver == '${DRIVER}'` } }] },
  });
}

/** A schedulable node (no kubelet: Ready by hand) and its cards' ResourceSlice (a card in MIG mode: its partitions). */
export async function createDraNode(
  k8s: Kubernetes136,
  node: string,
  cards: readonly (GpuCard & Pick<SliceCard, 'mig'>)[],
): Promise<void> {
  const kubectl = adminKubectl(k8s);
  await kubectl(['create', '-f', '-'], nodeObject(node));
  const status = readyNodeStatus();
  await kubectl(['patch', 'node', node, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
  await kubectl(['taint', 'node', node, 'node.kubernetes.io/not-ready:NoSchedule-']);
  const slices = buildResourceSlices({
    driver: DRIVER,
    nodeName: node,
    memoryUnitMiB: 1,
    cards: cards.map((c) => ({ ...c, healthy: true })),
    link: () => ({ nvlinks: 0, pcie: 'system' }),
    unhealthy: 'taint',
    generation: 1,
  });
  for (const slice of slices) await kubectl(['create', '-f', '-'], slice);
}

/** The ledger's charge hook for `cluster` on an HTTPS listener at `port` (0: any). */
export async function serveChargeHook(opts: {
  ledger: ClaimLedgerOptions['ledger'];
  cluster: string;
  tls: { keyPem: string; certPem: string };
  port?: number;
  /** Where MIG partitions' ledger rows are found, as the control plane's cluster state gives them. */
  partitionNode?: (node: string) => PartitionNode | undefined;
  /** The driver whose allocations it charges (default vcuda's). */
  driver?: string;
}): Promise<Listening> {
  const driver = opts.driver ?? DRIVER;
  const claims = createClaimLedger({
    ledger: opts.ledger,
    cluster: opts.cluster,
    driver,
    ...(opts.partitionNode ? { partitionNode: opts.partitionNode } : {}),
  });
  const route = claimChargeRoute({
    claims,
    driver,
    maxBodyBytes: 3 << 20,
    timeoutMs: 2_000,
    authenticate: () => true,
    logger: console,
  });
  return listen(new Hono().route('/admission/charge-claims', route), '127.0.0.1', opts.port ?? 0, {
    key: opts.tls.keyPem,
    cert: opts.tls.certPem,
  });
}

/**
 * Registers the charge hook at `url` with the API server, as the control plane registers it (only
 * that hook of the validating configuration: the claim validation hooks are not served). The API
 * server loads webhook configurations asynchronously: callers that must not race it wait for a
 * first charge.
 */
export async function registerChargeHook(
  k8s: Kubernetes136,
  url: string,
  caPem: string,
  /** Another driver's hook, beside vcuda's: its own configuration name and driver. */
  other?: { name: string; driver: string },
): Promise<void> {
  const config = registrationConfigSchema.parse({
    url,
    exemptNamespaces: ['kube-system'],
    ...(other ? { name: other.name } : {}),
  });
  const driverName = other?.driver ?? DRIVER;
  const built = buildClaimWebhookConfigurations({
    config,
    claims: { deviceClassName: DRIVER, driverName },
    caBundlePem: caPem,
  });
  const charge = {
    ...built.validating,
    webhooks: built.validating.webhooks.filter((h) => h.name.startsWith('charge.')),
  };
  await adminKubectl(k8s)(['apply', '-f', '-'], charge);
}

/** A serving certificate for 127.0.0.1, as the hook's listener needs. */
export function loopbackTls() {
  return issueServingCertificate({ dnsNames: [], ipAddresses: ['127.0.0.1'] }, 1, new Date());
}

/** `serveChargeHook` in this process, registered with the API server. */
export async function startChargeHook(
  k8s: Kubernetes136,
  opts: {
    ledger: ClaimLedgerOptions['ledger'];
    cluster: string;
    partitionNode?: (node: string) => PartitionNode | undefined;
    /** Another driver's hook, beside vcuda's (registerChargeHook). */
    other?: { name: string; driver: string };
  },
): Promise<Listening> {
  const { other, ...rest } = opts;
  const tls = await loopbackTls();
  const server = await serveChargeHook({ ...rest, tls, ...(other ? { driver: other.driver } : {}) });
  await registerChargeHook(k8s, server.url, tls.caPem, other);
  return server;
}
