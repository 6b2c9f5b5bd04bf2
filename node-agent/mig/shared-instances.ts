/**
 * Which MIG instances this node serves as shares (pure): those the configuration's `mig.shared`
 * entries match (an entry matches when every field it names does). A shared instance is served like
 * a small card, through `vcuda-core`/`vcuda-memory`, and never as a whole `mig-<profile>` instance.
 */
import type { NodeAgentConfig } from '../config.js';

export type SharedInstanceRule = NodeAgentConfig['mig']['shared'][number];

export type InstanceIdentity = { uuid: string; profile: string; cardIndex: number; start: number };

export function isSharedInstance(rules: readonly SharedInstanceRule[], i: InstanceIdentity): boolean {
  return rules.some(
    (r) =>
      (r.profile === undefined || r.profile === i.profile) &&
      (r.card === undefined || r.card === i.cardIndex) &&
      (r.start === undefined || r.start === i.start) &&
      (r.uuid === undefined || r.uuid.toLowerCase() === i.uuid.toLowerCase()),
  );
}
