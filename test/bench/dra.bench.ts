/**
 * What one quota on DRA claims costs an allocation, on the real Kubernetes 1.36 API server
 * (`../shared/kubernetes-1.36/`) and local PostgreSQL: the latency of the ResourceClaim status
 * UPDATE that writes an allocation (what kube-scheduler's PreBind waits on), and of the one that
 * clears it, with vcuda's charge hook (the control plane's route over a PostgreSQL ledger,
 * registered as the control plane registers it) and without it, in the same run on the same
 * server. The two arms are interleaved, claim by claim in ABBA order, once the hook is
 * registered: claims allocated by vcuda's driver are charged; claims allocated by another driver
 * are what the API server does without the check (the hook's match condition leaves them out, as
 * it leaves every other driver's claims). Run one arm after the other instead and the machine's
 * load drifting between them (other work sharing its cores and its PostgreSQL) moves each p99 by
 * more than the target. The difference is what the quota adds to each allocation.
 *
 * A third arm splits that cost: the same hook, served and registered the same way, for a third
 * driver's claims, over a ledger that accepts every charge at once. What it adds is the webhook
 * call alone (the API server's call out, TLS, the review's parsing); what the charged arm adds
 * beyond it is the ledger's transaction.
 * `VCUDA_BENCH_DRA_UPDATES` (default 300) sets the updates per arm.
 */
import { randomUUID } from 'node:crypto';
import { KubeConfig, ResourceV1Api } from '@kubernetes/client-node';
import type { ClaimLedgerOptions } from '../../control-plane/claim-ledger/claim-ledger.js';
import { createLedger } from '../../db/ledger.js';
import { createTestDatabase, isPostgresReachable } from '../support/db/test-databases.js';
import { adminKubectl, createDeviceClass, DRIVER, startChargeHook } from '../support/dra-real.js';
import { k8s136SkipReason, startKubernetes136 } from '../support/kubernetes-136.js';
import { atMost, type Benchmark, type Figure, percentile } from './harness.js';

const UPDATES = Number(process.env.VCUDA_BENCH_DRA_UPDATES ?? 300);
const NODE = 'node-1';
/** The driver of the arm without the check: the charge hook's match condition leaves its claims out. */
const OTHER_DRIVER = 'other.example.com';
/** The driver of the arm whose hook has a ledger that answers at once: the webhook's own cost. */
const INSTANT_DRIVER = 'instant.example.com';

type Timings = { allocate: number[]; clear: number[] };
type Arms = { without: Timings; withHook: Timings; hookAlone: Timings };

/** A ledger that accepts every charge and release at once, holding nothing. */
function instantLedger(): ClaimLedgerOptions['ledger'] {
  return {
    charge: async () => ({ reused: false }),
    release: async () => ({ released: 1 }),
    liveClaimHolders: async () => [],
  };
}

function allocationOf(driver: string) {
  return {
    devices: {
      results: [
        {
          request: 'gpu',
          driver,
          pool: NODE,
          device: 'gpu-0',
          shareID: randomUUID(),
          consumedCapacity: { cores: '1', memory: '1Mi' },
        },
      ],
    },
    nodeSelector: { nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [NODE] }] }] },
  };
}

/**
 * One fresh claim: created, allocated by `driver` (timed), `whileAllocated` called, cleared
 * (timed), deleted.
 */
async function oneClaim(
  api: ResourceV1Api,
  name: string,
  timings: Timings,
  driver: string,
  whileAllocated: () => Promise<void> = async () => undefined,
): Promise<void> {
  const claim = await api.createNamespacedResourceClaim({
    namespace: 'bench',
    body: {
      metadata: { name },
      spec: {
        devices: {
          requests: [
            {
              name: 'gpu',
              exactly: { deviceClassName: DRIVER, capacity: { requests: { cores: '1', memory: '1Mi' } } },
            },
          ],
        },
      },
    },
  });
  let t0 = performance.now();
  const allocated = await api.replaceNamespacedResourceClaimStatus({
    name,
    namespace: 'bench',
    body: { ...claim, status: { allocation: allocationOf(driver) } } as never,
  });
  timings.allocate.push(performance.now() - t0);
  await whileAllocated();
  t0 = performance.now();
  await api.replaceNamespacedResourceClaimStatus({ name, namespace: 'bench', body: { ...allocated, status: {} } });
  timings.clear.push(performance.now() - t0);
  await api.deleteNamespacedResourceClaim({ name, namespace: 'bench' });
}

/** Allocates and clears `UPDATES` fresh claims of `driver` one after another. */
async function timeUpdates(api: ResourceV1Api, arm: string, driver: string): Promise<Timings> {
  const timings: Timings = { allocate: [], clear: [] };
  for (let i = 0; i < UPDATES; i++) await oneClaim(api, `${arm}-${i}`, timings, driver);
  return timings;
}

/**
 * `count` claims of each arm: vcuda's driver (charged), another (left out by the hooks' match
 * conditions) and the instant hook's, in an order that rotates claim by claim so that no arm is
 * always first.
 */
async function timeInterleaved(api: ResourceV1Api, label: string, count: number): Promise<Arms> {
  const arms: Arms = {
    without: { allocate: [], clear: [] },
    withHook: { allocate: [], clear: [] },
    hookAlone: { allocate: [], clear: [] },
  };
  for (let i = 0; i < count; i++) {
    const runs = [
      () => oneClaim(api, `${label}-plain-${i}`, arms.without, OTHER_DRIVER),
      () => oneClaim(api, `${label}-charged-${i}`, arms.withHook, DRIVER),
      () => oneClaim(api, `${label}-instant-${i}`, arms.hookAlone, INSTANT_DRIVER),
    ];
    for (let k = 0; k < runs.length; k++) await (runs[(i + k) % runs.length] as () => Promise<void>)();
  }
  return arms;
}

/** The API server loads webhook configurations asynchronously: allocate probes until one is charged. */
async function untilCharged(api: ResourceV1Api, ledger: ReturnType<typeof createLedger>): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (let i = 0; Date.now() < deadline; i++) {
    let charged = false;
    await oneClaim(api, `probe-${i}`, { allocate: [], clear: [] }, DRIVER, async () => {
      charged = (await ledger.liveClaimHolders('bench')).length > 0;
    });
    if (charged) return;
  }
  throw new Error('the charge hook did not take effect within 30 s');
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

const bench: Benchmark = {
  name: 'dra',
  description:
    "DRA claims: the latency a claim's allocating and clearing status UPDATE pays on kube-apiserver 1.36 with vcuda's ledger charge hook (PostgreSQL) against without it, interleaved claim by claim in the same run",
  async run({ log }) {
    const skip = k8s136SkipReason();
    if (skip) throw new Error(`the dra benchmark needs ${skip}`);
    if (!(await isPostgresReachable())) throw new Error('the dra benchmark needs PostgreSQL at 127.0.0.1:5432');
    const k8s = await startKubernetes136();
    const pg = await createTestDatabase('postgres');
    let server: Awaited<ReturnType<typeof startChargeHook>> | undefined;
    let instant: Awaited<ReturnType<typeof startChargeHook>> | undefined;
    try {
      const ledger = createLedger(pg.db, { clock: () => new Date() });
      await ledger.upsertNode('bench', NODE, [{ uuid: 'GPU-bench-0', index: 0, model: 'H100', memoryMiB: 1_000_000 }]);
      const kc = new KubeConfig();
      kc.loadFromFile(k8s.kubeconfig);
      const api = kc.makeApiClient(ResourceV1Api);
      await adminKubectl(k8s)(['create', 'namespace', 'bench']);
      await createDeviceClass(k8s);
      await timeUpdates(api, 'warm', OTHER_DRIVER);
      server = await startChargeHook(k8s, { ledger, cluster: 'bench' });
      instant = await startChargeHook(k8s, {
        ledger: instantLedger(),
        cluster: 'bench',
        other: { name: 'vcuda-bench-instant', driver: INSTANT_DRIVER },
      });
      await untilCharged(api, ledger);
      await timeInterleaved(api, 'warm-hook', 50);
      const arms = await timeInterleaved(api, 'timed', UPDATES);
      const charged = await ledger.liveClaimHolders('bench');
      if (charged.length !== 0)
        throw new Error(`${charged.length} claims still charged after their allocations were cleared`);
      return figuresOf(arms, log);
    } finally {
      await server?.close();
      await instant?.close();
      await k8s.stop();
      await pg.drop();
    }
  },
};

function figuresOf({ without, withHook, hookAlone }: Arms, log: (line: string) => void): Figure[] {
  const figures: Figure[] = [];
  for (const step of ['allocate', 'clear'] as const) {
    const a = sorted(without[step]);
    const b = sorted(withHook[step]);
    const h = sorted(hookAlone[step]);
    const added99 = percentile(b, 99) - percentile(a, 99);
    log(
      `${step}: p50 ${percentile(a, 50).toFixed(2)} -> ${percentile(b, 50).toFixed(2)} ms (hook alone ${percentile(h, 50).toFixed(2)}), p99 ${percentile(a, 99).toFixed(2)} -> ${percentile(b, 99).toFixed(2)} ms (hook alone ${percentile(h, 99).toFixed(2)})`,
    );
    const scenario = `${UPDATES} ${step} status UPDATEs per arm, interleaved`;
    const alone = `${scenario}: the same hook over a ledger that answers at once (the webhook call alone)`;
    figures.push(
      { name: `${step}_p50_without_hook_ms`, value: percentile(a, 50), unit: 'ms', scenario },
      { name: `${step}_p50_with_hook_ms`, value: percentile(b, 50), unit: 'ms', scenario },
      { name: `${step}_p99_without_hook_ms`, value: percentile(a, 99), unit: 'ms', scenario },
      { name: `${step}_p99_with_hook_ms`, value: percentile(b, 99), unit: 'ms', scenario },
      {
        name: `${step}_p99_added_ms`,
        value: added99,
        unit: 'ms',
        scenario,
        ...(step === 'allocate' ? atMost(added99, 5) : {}),
      },
      {
        name: `${step}_p50_added_by_hook_alone_ms`,
        value: percentile(h, 50) - percentile(a, 50),
        unit: 'ms',
        scenario: alone,
      },
      {
        name: `${step}_p99_added_by_hook_alone_ms`,
        value: percentile(h, 99) - percentile(a, 99),
        unit: 'ms',
        scenario: alone,
      },
    );
  }
  return figures;
}

export default bench;
