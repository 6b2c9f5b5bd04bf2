/**
 * Test builder for pods: `pod('share').share(30, 8192).coreLimit(60).obj()`.
 * Produces the plain JSON shape the API server sends, so tests read like the scenario they check.
 */
import { resourceNames } from '../../contract/names.js';
import type { ContainerLike, PodLike } from '../../contract/pod-request.js';

type Resources = Record<string, string>;

export class PodBuilder {
  private readonly metadata: { name: string; namespace: string; uid: string; annotations: Record<string, string> };
  private readonly containers: ContainerLike[] = [];
  private readonly initContainers: ContainerLike[] = [];
  private nodeName: string | undefined;

  constructor(
    name: string,
    private readonly domain = 'nvidia.com',
  ) {
    this.metadata = { name, namespace: 'team-a', uid: `uid-${name}`, annotations: {} };
  }

  namespace(ns: string): this {
    this.metadata.namespace = ns;
    return this;
  }

  uid(uid: string): this {
    this.metadata.uid = uid;
    return this;
  }

  annotate(key: string, value: string): this {
    this.metadata.annotations[key] = value;
    return this;
  }

  memoryLimit(limit: number | string): this {
    return this.annotate(resourceNames(this.domain).memoryLimit, String(limit));
  }

  coreLimit(limit: number | string): this {
    return this.annotate(resourceNames(this.domain).coreLimit, String(limit));
  }

  onNode(name: string): this {
    this.nodeName = name;
    return this;
  }

  /** A container with the given limits (requests mirror them unless `requests` is given). */
  container(name: string, limits: Resources, requests: Resources | null = limits): this {
    this.containers.push({
      name,
      resources: { limits: { ...limits }, ...(requests ? { requests: { ...requests } } : {}) },
    });
    return this;
  }

  init(name: string, limits: Resources): this {
    this.initContainers.push({ name, resources: { limits: { ...limits }, requests: { ...limits } } });
    return this;
  }

  /** A container with a share of one card. */
  share(core: number, memoryUnits: number, name = `c${this.containers.length}`): this {
    const n = resourceNames(this.domain);
    return this.container(name, { [n.core]: String(core), [n.memory]: String(memoryUnits) });
  }

  /** A container with whole cards. */
  whole(cards: number, name = `c${this.containers.length}`): this {
    return this.container(name, { [resourceNames(this.domain).core]: String(cards * 100) });
  }

  /** A container with whole MIG instances of one profile (`3g.40gb`), as NVIDIA's `mixed` strategy names them. */
  mig(profile: string, count = 1, name = `c${this.containers.length}`): this {
    return this.container(name, {
      [`${resourceNames(this.domain).migPrefix}${profile.replace('+', '.')}`]: String(count),
    });
  }

  obj(): PodLike & { apiVersion: string; kind: string } {
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: structuredClone(this.metadata),
      spec: {
        containers: structuredClone(this.containers),
        ...(this.initContainers.length ? { initContainers: structuredClone(this.initContainers) } : {}),
        ...(this.nodeName ? { nodeName: this.nodeName } : {}),
      },
    };
  }
}

export function pod(name = 'p', domain = 'nvidia.com'): PodBuilder {
  return new PodBuilder(name, domain);
}
