import { describe, expect, it } from 'vitest';
import { canonicalDraQuantity, formatDraQuantity, parseDraQuantity, roundUpToRange } from './dra-quantity.js';

const q = (text: string) => parseDraQuantity(text)!;

describe('DRA quantities', () => {
  it.each([
    ['8000M', '8G'],
    ['30', '30'],
    ['100', '100'],
    ['24Gi', '24Gi'],
    ['1024Mi', '1Gi'],
    ['1500', '1500'],
    ['12000', '12k'],
    ['0.5', '500m'],
    ['1e3', '1k'],
    ['1025Ki', '1025Ki'],
    ['0', '0'],
  ])('%s is written back as %s (kube-apiserver 1.36 wrote 8000M back as 8G)', (input, canonical) => {
    expect(canonicalDraQuantity(input)).toBe(canonical);
  });

  it('refuses what is not a quantity', () => {
    for (const bad of ['abc', '', '1.2.3', '5Xi', 'x'.repeat(50)]) expect(parseDraQuantity(bad)).toBeUndefined();
    expect(canonicalDraQuantity('abc')).toBe('abc');
  });

  it('rounds 8000M up to 7630Mi with min 1Mi and step 1Mi, as kube-scheduler 1.36 did', () => {
    expect(formatDraQuantity(roundUpToRange(q('8000M'), q('1Mi'), q('1Mi')))).toBe('7630Mi');
    expect(formatDraQuantity(roundUpToRange(q('8Gi'), q('1Mi'), q('1Mi')))).toBe('8Gi');
    expect(formatDraQuantity(roundUpToRange(q('30'), q('1'), q('1')))).toBe('30');
    expect(formatDraQuantity(roundUpToRange(q('0'), q('1'), q('1')))).toBe('1');
    expect(formatDraQuantity(roundUpToRange(q('33'), q('10'), undefined))).toBe('33');
    expect(formatDraQuantity(roundUpToRange(q('33'), q('10'), q('10')))).toBe('40');
  });
});
