import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { classifyCore, parseByteSize, parseWholeQuantity } from './quantities.js';

describe('parseWholeQuantity', () => {
  it.each([
    ['30', 30],
    ['100', 100],
    ['1k', 1000],
    ['1e3', 1000],
    ['1E2', 100],
    ['2Ki', 2048],
    ['1Mi', 1048576],
    ['1.5k', 1500],
    ['3000m', 3],
    ['+7', 7],
    ['-5', -5],
    [' 42 ', 42],
    [64, 64],
  ])('%j is %d', (input, value) => {
    expect(parseWholeQuantity(input)).toEqual({ ok: true, value });
  });

  it.each([
    ['1.5', 'fraction'],
    ['500m', 'fraction'],
    ['1e-1', 'fraction'],
    ['abc', 'syntax'],
    ['', 'syntax'],
    ['1 k', 'syntax'],
    ['1KB', 'syntax'],
    ['0x10', 'syntax'],
    ['1e40', 'too-large'],
    ['99999999999999999', 'too-large'],
  ])('%j is refused as %s', (input, reason) => {
    expect(parseWholeQuantity(input)).toEqual({ ok: false, reason });
  });

  it('refuses non-string, non-number input', () => {
    expect(parseWholeQuantity(null)).toEqual({ ok: false, reason: 'syntax' });
    expect(parseWholeQuantity({})).toEqual({ ok: false, reason: 'syntax' });
  });

  it('agrees with plain integers for every safe integer (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), (n) => {
        expect(parseWholeQuantity(String(n))).toEqual({ ok: true, value: n });
        expect(parseWholeQuantity(`${n}000m`)).toEqual({ ok: true, value: n });
      }),
    );
  });
});

describe('classifyCore', () => {
  it('accepts 1..99 as a share of one card (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 99 }), (n) => {
        expect(classifyCore(n)).toEqual({ kind: 'share', percent: n });
      }),
    );
  });

  it('accepts positive multiples of 100 as whole cards (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000 }), (k) => {
        expect(classifyCore(k * 100)).toEqual({ kind: 'whole', cards: k });
      }),
    );
  });

  it('refuses everything else above 100 that is not a multiple of 100 (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 101, max: 1_000_000 }).filter((n) => n % 100 !== 0),
        (n) => {
          expect(classifyCore(n)).toBeUndefined();
        },
      ),
    );
  });

  it.each([0, -1, -100, 1.5, Number.NaN])('refuses %d', (n) => {
    expect(classifyCore(n)).toBeUndefined();
  });
});

describe('parseByteSize', () => {
  it.each([
    ['4GiB', 4 * 2 ** 30],
    ['512MiB', 512 * 2 ** 20],
    ['4096', 4096 * 2 ** 20],
    ['1.5GiB', 1.5 * 2 ** 30],
    ['10B', 10],
  ])('%s', (text, bytes) => {
    expect(parseByteSize(text)).toBe(bytes);
  });

  it.each(['4GB', 'lots', '', '-1GiB', '0.3B'])('refuses %j', (text) => {
    expect(parseByteSize(text)).toBeUndefined();
  });
});
