import { describe, expect, it } from 'vitest';
import { chooseComputeSensor } from './compute-sensor.js';

const source = (supported?: () => boolean) => ({
  processUtilization: () => [],
  utilizationRates: () => ({ gpuPercent: 0 }),
  ...(supported ? { processUtilizationSupported: supported } : {}),
});

describe('chooseComputeSensor', () => {
  it('uses the in-process sensor only where NVML says per-process utilization is not supported', () => {
    expect(
      chooseComputeSensor(
        source(() => false),
        0,
      ),
    ).toBe('in-process');
    expect(
      chooseComputeSensor(
        source(() => true),
        0,
      ),
    ).toBe('nvml');
    expect(chooseComputeSensor(source(), 0)).toBe('nvml');
  });

  it('keeps NVML when the probe itself fails', () => {
    expect(
      chooseComputeSensor(
        source(() => {
          throw new Error('driver gone');
        }),
        0,
      ),
    ).toBe('nvml');
  });
});
