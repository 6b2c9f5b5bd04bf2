import { describe, expect, it } from 'vitest';
import { chooseComputeSensor, tickSensor } from './compute-sensor.js';

const source = (supported?: () => boolean) => ({
  processUtilization: () => [],
  utilizationRates: () => ({ gpuPercent: 0 }),
  ...(supported ? { processUtilizationSupported: supported } : {}),
});

const supporting = source(() => true);

describe('chooseComputeSensor', () => {
  it('measures in-process by default, whatever NVML offers', () => {
    expect(chooseComputeSensor(supporting, 0)).toEqual({ sensor: 'in-process', reason: 'configured' });
    expect(chooseComputeSensor(source(), 0).sensor).toBe('in-process');
  });

  it('uses NVML when configured, except where NVML says per-process utilization is not supported (MIG)', () => {
    expect(chooseComputeSensor(supporting, 0, 'nvml')).toEqual({ sensor: 'nvml', reason: 'configured' });
    expect(chooseComputeSensor(source(), 0, 'nvml').sensor).toBe('nvml');
    expect(
      chooseComputeSensor(
        source(() => false),
        0,
        'nvml',
      ),
    ).toEqual({
      sensor: 'in-process',
      reason: 'nvml-unsupported',
    });
  });

  it('keeps the configured NVML when the probe itself fails', () => {
    const failing = source(() => {
      throw new Error('driver gone');
    });
    expect(chooseComputeSensor(failing, 0, 'nvml').sensor).toBe('nvml');
  });
});

describe('tickSensor', () => {
  it('reads NVML only for a card whose every holder libvcuda does not time (whole cards)', () => {
    expect(tickSensor([{ unmeasured: true }])).toBe('nvml');
    expect(tickSensor([{ unmeasured: true }, { unmeasured: true }])).toBe('nvml');
    expect(tickSensor([{ unmeasured: true }, {}])).toBe('in-process');
    expect(tickSensor([{}])).toBe('in-process');
    expect(tickSensor([])).toBe('in-process');
  });
});
