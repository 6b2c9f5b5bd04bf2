/**
 * Which measurement feeds a card's compute limiters, chosen once per card when its sampler is
 * made: NVML's per-process utilization where the card has it, else (MIG: NVML answers
 * NOT_SUPPORTED) the busy time libvcuda measures in-process and keeps in each region
 * (busy-sampler.ts). Both write the same samples; native/COMPUTE.md describes both sensors.
 */
import { createBusySampler } from './busy-sampler.js';
import { type CardSampler, type CardSamplerOptions, createCardSampler } from './card-sampler.js';

export type ComputeSensor = 'nvml' | 'in-process';

/** The sensor for a card (pure over the source's answer). A probe that throws keeps NVML. */
export function chooseComputeSensor(source: CardSamplerOptions['source'], cardIndex: number): ComputeSensor {
  try {
    return source.processUtilizationSupported?.(cardIndex) === false ? 'in-process' : 'nvml';
  } catch {
    return 'nvml';
  }
}

/** The card's sampler over the sensor chosen for it. */
export function createComputeSampler(opts: CardSamplerOptions): { sampler: CardSampler; sensor: ComputeSensor } {
  const sensor = chooseComputeSensor(opts.source, opts.cardIndex);
  const sampler = sensor === 'nvml' ? createCardSampler(opts) : createBusySampler(opts);
  return { sampler, sensor };
}
