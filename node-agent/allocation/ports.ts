/** What the allocation path needs from the outside world, declared by the code that uses it. */
import type { JSONWebKeySet } from 'jose';
import type { EventReason } from '../../contract/index.js';
import type { ListPodResourcesResponse } from '../device-plugin/protocol.js';
import type { PodView } from './pod-view.js';

/** Pods bound to this node, from a watch cache. */
export interface PodSource {
  pods(): PodView[];
  /** Re-lists from the API server; used once before a refusal, in case the watch lags. */
  refresh(): Promise<void>;
}

export interface PodResourcesLister {
  list(): Promise<ListPodResourcesResponse>;
}

export interface PodAnnotator {
  annotatePod(namespace: string, name: string, annotations: Record<string, string>): Promise<void>;
}

export interface EventRecorder {
  podEvent(pod: { namespace: string; name: string; uid: string }, reason: EventReason, message: string): void;
}

export type JwksSource = () => Promise<JSONWebKeySet>;
