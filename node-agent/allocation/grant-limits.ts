/** A signed container grant as limit-file records (pure). */
import type { CardGrant, ContainerGrant, DeviceLimit } from '../../contract/index.js';

/** Total core of a grant: what the container's Allocate carries. */
export function grantCore(grant: ContainerGrant): number {
  return grant.cards.reduce((sum, c) => sum + c.core, 0);
}

/** One card of a grant; a whole card has no ceiling above its request, a share may burst to the pod's limit. */
export function deviceLimitOf(card: CardGrant, grant: ContainerGrant, hostIndex: number): DeviceLimit {
  const coreLimit = Math.max(card.core, Math.min(grant.coreLimit, 100));
  return {
    uuid: card.uuid,
    hostIndex,
    mode: coreLimit > card.core ? 'soft' : 'hard',
    memoryLimitBytes: card.memoryBytes,
    coreRequest: card.core,
    coreLimit,
    ...(card.memoryLimitBytes !== undefined && card.memoryLimitBytes > card.memoryBytes
      ? { memoryBurstLimitBytes: card.memoryLimitBytes }
      : {}),
  };
}
