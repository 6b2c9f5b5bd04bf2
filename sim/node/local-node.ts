/**
 * A node of a local cluster, described once (`NodeProcessSpec`) and started in this process or in
 * a process of its own: the same description makes the same node either way.
 */
import { expandNodes } from '../cluster-spec.js';
import { type NodeProcess, type NodeProcessSpec, startNodeProcess } from './node-process.js';
import { type RunningSimNode, type SimNodeOptions, startSimNode } from './sim-node.js';

/** A node of the local cluster: in this process, or in its own. */
export type LocalNode = RunningSimNode | NodeProcess;

/** What a node uses of the process it runs in: its API client, JWKS reader and log. */
export type NodeIo = Pick<SimNodeOptions, 'client' | 'jwks' | 'log'>;

/** The node's internals, for tests of a cluster whose nodes run in this process. */
export function inThisProcess(node: LocalNode): RunningSimNode {
  if ('pid' in node) throw new Error(`node ${node.name} runs in process ${node.pid}, not in this one`);
  return node;
}

/** The options `startSimNode` takes for the node `spec` describes. */
export function simNodeOptionsOf(spec: NodeProcessSpec, io: NodeIo): SimNodeOptions {
  const node = expandNodes(spec.cluster).find((n) => n.name === spec.nodeName);
  if (!node) throw new Error(`cluster ${spec.cluster.name} has no node ${spec.nodeName}`);
  return {
    ...io,
    apiUrl: spec.apiUrl,
    ...(spec.agentToken ? { agentToken: spec.agentToken } : {}),
    ...(spec.apiCaPem ? { apiCaPem: spec.apiCaPem } : {}),
    node,
    root: spec.root,
    domain: spec.domain,
    memoryUnitMiB: spec.cluster.memoryUnitMiB,
    nativeBuildDir: spec.nativeBuildDir,
    ...(spec.workloadDir ? { workloadDir: spec.workloadDir } : {}),
    ...(spec.usage ? { usage: spec.usage } : {}),
    ...(spec.heartbeatPeriodMs ? { heartbeatPeriodMs: spec.heartbeatPeriodMs } : {}),
    ...(spec.agentMode ? { agentMode: spec.agentMode } : {}),
  };
}

/** Starts the node in this process, sharing `io`, or without it in a process of its own. */
export function startLocalNode(spec: NodeProcessSpec, io?: NodeIo): Promise<LocalNode> {
  return io ? startSimNode(simNodeOptionsOf(spec, io)) : startNodeProcess(spec);
}
