/**
 * One planned card as the signed grant carries it (pure). The burst ceiling rides along so the
 * node agent can write it into the limit file; it was never part of the fit, which reserved only
 * the guaranteed memory.
 */
import { type CardGrant, type ContainerGpuRequest, MIB } from '../../contract/index.js';
import type { CardPlan } from '../placement/fit.js';

/** The container's burst ceiling per card in MiB, or undefined (no burst). */
export function burstCeilingMiB(containers: readonly ContainerGpuRequest[], name: string): number | undefined {
  return containers.find((c) => c.name === name)?.memoryLimitMiBPerCard;
}

export function cardGrantOf(plan: CardPlan, burstMiB: number | undefined): CardGrant {
  const grant: CardGrant = { uuid: plan.uuid, core: plan.core, memoryBytes: plan.memoryMiB * MIB };
  // A whole MIG instance: its memory is the instance, nothing to burst into.
  if (plan.mig) return { ...grant, mig: { ...plan.mig } };
  // A whole card's memory is the card: a ceiling at or below it would burst into nothing.
  if (burstMiB !== undefined && burstMiB > plan.memoryMiB) grant.memoryLimitBytes = burstMiB * MIB;
  return grant;
}
