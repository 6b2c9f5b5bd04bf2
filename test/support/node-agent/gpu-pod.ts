/** A builder for GPU pods in node-agent tests: `gpuPod('a').container('main', 30, 1024).onNode('n1').obj()`. */
import type { ResourceNames } from '../../../contract/index.js';
import type { PodObject } from '../../../node-agent/allocation/pod-view.js';
import type { KubeletPod } from './fake-kubelet.js';

type C = { name: string; core: number; memoryUnits: number; isInit: boolean };

export class GpuPodBuilder {
  private readonly containers: C[] = [];
  private nodeName = '';
  private annotations: Record<string, string> = {};

  constructor(
    private readonly names: ResourceNames,
    readonly name: string,
    readonly uid: string,
    readonly namespace = 'default',
  ) {}

  container(name: string, core: number, memoryUnits: number, isInit = false): this {
    this.containers.push({ name, core, memoryUnits, isInit });
    return this;
  }

  onNode(node: string): this {
    this.nodeName = node;
    return this;
  }

  annotate(a: Record<string, string>): this {
    this.annotations = { ...this.annotations, ...a };
    return this;
  }

  obj(): PodObject {
    const spec = (c: C) => ({
      name: c.name,
      resources: {
        limits: { [this.names.core]: String(c.core), [this.names.memory]: String(c.memoryUnits) },
        requests: { [this.names.core]: String(c.core), [this.names.memory]: String(c.memoryUnits) },
      },
    });
    return {
      metadata: { name: this.name, namespace: this.namespace, uid: this.uid, annotations: { ...this.annotations } },
      spec: {
        nodeName: this.nodeName,
        initContainers: this.containers.filter((c) => c.isInit).map(spec),
        containers: this.containers.filter((c) => !c.isInit).map(spec),
      },
      status: { phase: 'Pending' },
    };
  }

  /** The same pod as the kubelet admits it; memory is requested only when a memory plugin exists. */
  kubelet(withMemory: boolean): KubeletPod {
    return {
      namespace: this.namespace,
      name: this.name,
      containers: this.containers.map((c) => ({
        name: c.name,
        isInit: c.isInit,
        requests: {
          [this.names.core]: c.core,
          ...(withMemory ? { [this.names.memory]: c.memoryUnits } : {}),
        },
      })),
    };
  }
}
