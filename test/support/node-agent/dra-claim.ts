/**
 * ResourceClaims as kube-scheduler allocates them for driver gpu.vcuda.io (resource.k8s.io/v1), for
 * the DRA driver's tests: `claim('c1').share('gpu-0', 30, 8 * GiB).obj()`.
 */
import { DRA_PARAMETERS_API_VERSION, DRA_PARAMETERS_KIND } from '../../../contract/index.js';

export const GiB = 1024 ** 3;

type Result = {
  request: string;
  driver: string;
  pool: string;
  device: string;
  shareID?: string;
  consumedCapacity?: Record<string, string>;
};

export class ClaimBuilder {
  private readonly results: Result[] = [];
  private readonly config: object[] = [];
  private pod: { uid: string; name: string } | undefined;

  constructor(
    readonly name: string,
    readonly uid: string,
    readonly namespace: string,
    private readonly pool: string,
    private readonly driver: string,
  ) {}

  share(device: string, cores: number, memoryBytes: number, opts: Partial<Result> = {}): this {
    const n = this.results.length;
    this.results.push({
      request: `gpu${n}`,
      driver: this.driver,
      pool: this.pool,
      device,
      shareID: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
      consumedCapacity: { cores: String(cores), memory: String(memoryBytes) },
      ...opts,
    });
    return this;
  }

  /** A MIG partition, exclusive: no shareID, no consumedCapacity. */
  mig(device: string, opts: Partial<Result> = {}): this {
    this.results.push({ request: `mig${this.results.length}`, driver: this.driver, pool: this.pool, device, ...opts });
    return this;
  }

  softLimit(coreLimit: number, requests?: string[]): this {
    this.config.push({
      source: 'FromClaim',
      ...(requests ? { requests } : {}),
      opaque: {
        driver: this.driver,
        parameters: { apiVersion: DRA_PARAMETERS_API_VERSION, kind: DRA_PARAMETERS_KIND, coreLimit },
      },
    });
    return this;
  }

  rawConfig(parameters: unknown): this {
    this.config.push({ source: 'FromClaim', opaque: { driver: this.driver, parameters } });
    return this;
  }

  reservedFor(uid: string, name = 'pod'): this {
    this.pod = { uid, name };
    return this;
  }

  obj() {
    return {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceClaim',
      metadata: { name: this.name, namespace: this.namespace, uid: this.uid },
      status: {
        allocation: { devices: { results: this.results, config: this.config } },
        ...(this.pod ? { reservedFor: [{ resource: 'pods', name: this.pod.name, uid: this.pod.uid }] } : {}),
      },
    };
  }

  ref() {
    return { namespace: this.namespace, name: this.name, uid: this.uid };
  }
}

let serial = 0;

export function claim(name: string, opts: { pool?: string; driver?: string; namespace?: string } = {}): ClaimBuilder {
  const uid = `c1a1m000-0000-4000-8000-${String(++serial).padStart(12, '0')}`;
  return new ClaimBuilder(name, uid, opts.namespace ?? 'default', opts.pool ?? 'node-1', opts.driver ?? 'gpu.vcuda.io');
}
