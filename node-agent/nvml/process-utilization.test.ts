/**
 * Which NVML call gives the per-process samples: the versioned one first, the old one when the
 * driver lacks it (FUNCTION_NOT_FOUND, no export) or answers NOT_SUPPORTED. The calls here are
 * JavaScript stand-ins; nvml-gpu-source.test.ts runs both paths over native/'s fake NVML.
 */
import { describe, expect, it } from 'vitest';
import { type ProcessUtilizationCalls, readProcessUtilization } from './process-utilization.js';

type Calls = { info: unknown[][]; legacy: unknown[][] };

/** An old-call stand-in holding one sample (pid 7, 55 % SM) after `since` 0. */
function legacy(log: Calls) {
  return (device: unknown, buf: Uint8Array | null, count: number[], since: bigint) => {
    log.legacy.push([device, since]);
    if (!buf || (count[0] ?? 0) < 1) {
      count[0] = 1;
      return 7;
    }
    const view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
    view.writeUInt32LE(7, 0);
    view.writeBigUInt64LE(1234n, 8);
    view.writeUInt32LE(55, 16);
    view.writeUInt32LE(20, 20);
    count[0] = 1;
    return 0;
  };
}

function calls(info: ((device: unknown, s: { version: number }) => number) | null, log: Calls) {
  const infoFn = info
    ? (device: unknown, s: { version: number }) => {
        log.info.push([device, s.version]);
        return info(device, s);
      }
    : null;
  return { info: infoFn, legacy: legacy(log) } as unknown as ProcessUtilizationCalls;
}

const fail = (call: string, rc: number) => {
  if (rc !== 0) throw new Error(`${call}: ${rc}`);
};

describe('per-process samples: versioned call first, old call as fallback', () => {
  for (const [name, rc] of [
    ['NOT_SUPPORTED', 3],
    ['FUNCTION_NOT_FOUND', 13],
  ] as const) {
    it(`falls back to nvmlDeviceGetProcessUtilization when the versioned call answers ${name}`, () => {
      const log: Calls = { info: [], legacy: [] };
      const read = readProcessUtilization(
        calls(() => rc, log),
        'dev',
        0,
        fail,
      );
      expect(read).toEqual({
        source: 'process-utilization',
        samples: [{ pid: 7, timestampUs: 1234, smPercent: 55, memoryPercent: 20 }],
      });
      expect(log.info).toEqual([['dev', 0x0100_0018]]);
      expect(log.legacy.length).toBe(2);
    });
  }

  it('uses the old call alone when the library has no versioned export', () => {
    const log: Calls = { info: [], legacy: [] };
    const read = readProcessUtilization(calls(null, log), 'dev', 500, fail);
    expect(read.source).toBe('process-utilization');
    expect(read.samples).toHaveLength(1);
    expect(log.legacy[0]).toEqual(['dev', 500n]);
  });

  it('keeps to the versioned call when it answers, even with nothing to report', () => {
    const log: Calls = { info: [], legacy: [] };
    const read = readProcessUtilization(
      calls(() => 6 /* NOT_FOUND: no samples */, log),
      'dev',
      0,
      fail,
    );
    expect(read).toEqual({ source: 'processes-utilization-info', samples: [] });
    expect(log.legacy).toEqual([]);
  });

  it('reports another failure of the versioned call, naming it', () => {
    const log: Calls = { info: [], legacy: [] };
    expect(() =>
      readProcessUtilization(
        calls(() => 999, log),
        'dev',
        0,
        fail,
      ),
    ).toThrow('nvmlDeviceGetProcessesUtilizationInfo: 999');
  });
});
