import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { FakeGpuSource, fakeCards } from '../test/support/node-agent/fake-gpu-source.js';
import { CardHealth, isCriticalXid, watchCardHealth } from './health.js';
import { NvmlError } from './nvml/nvml-gpu-source.js';

const IGNORED = [13, 31, 43, 45, 68, 109];

describe('card health', () => {
  it.each([
    [13, false],
    [31, false],
    [43, false],
    [48, true],
    [79, true],
    [999, true],
  ])('Xid %i critical: %s', (xid, critical) => {
    expect(isCriticalXid(xid, IGNORED)).toBe(critical);
  });

  it('marks only the card the event names, once, and tells listeners', () => {
    const h = new CardHealth(fakeCards({ cards: 2, memoryMiB: 10 }), IGNORED);
    let told = 0;
    h.subscribe(() => told++);
    expect(h.apply({ cardIndex: 1, kind: 'xid', xid: 13 })).toBe(false);
    expect(h.apply({ cardIndex: 1, kind: 'xid', xid: 79 })).toBe(true);
    expect(h.apply({ cardIndex: 1, kind: 'lost' })).toBe(false);
    expect(h.views().map((c) => c.healthy)).toEqual([true, false]);
    expect(told).toBe(1);
  });

  it('keeps a card in MIG mode out of the device lists and refuses it to the allocator', () => {
    const [a, b] = fakeCards({ cards: 2, memoryMiB: 10 }).map((c, i) => ({ ...c, migMode: i === 0 }));
    const h = new CardHealth(
      [a, b].filter((c) => c !== undefined),
      IGNORED,
    );
    expect(h.views().map((c) => c.migMode === true)).toEqual([true, false]);
    expect(h.cardByUuid(a?.uuid ?? '')).toMatchObject({
      healthy: false,
      healthReason: 'in MIG mode: served only as MIG instances',
    });
    expect(h.cardByUuid(b?.uuid ?? '')).toMatchObject({ healthy: true });
  });

  it('fails closed on an event it cannot attribute to a card', () => {
    const h = new CardHealth(fakeCards({ cards: 3, memoryMiB: 10 }), IGNORED);
    h.apply({ cardIndex: -1, kind: 'lost' });
    expect(h.views().every((c) => !c.healthy)).toBe(true);
  });

  it('logs a failed wait as the error itself: its code, its cause and its stack reach the log line', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write: (chunk, _encoding, done) => {
        lines.push(String(chunk));
        done();
      },
    });
    const gpu = new FakeGpuSource({ cards: 1, memoryMiB: 10 });
    const abort = new AbortController();
    const failure = new NvmlError('nvmlEventSetWait_v2', 15, 'GPU is lost');
    Object.defineProperty(failure, 'cause', { value: new Error('driver went away') });
    const health = new CardHealth(gpu.listCards(), IGNORED);
    // Aborted during the failed wait, the watch would return without logging: abort after the log.
    gpu.waitEvent = async () => {
      setImmediate(() => abort.abort());
      throw failure;
    };
    await watchCardHealth(gpu, health, abort.signal, pino({}, sink), 1);
    const logged = JSON.parse(lines[0] ?? '{}');
    expect(logged.msg).toBe('waiting for GPU events failed');
    expect(logged.err).toMatchObject({ type: 'NvmlError', code: 'nvml' });
    expect(logged.err.message).toContain('driver went away');
    expect(logged.err.stack).toContain('caused by: Error: driver went away');
  });
});
