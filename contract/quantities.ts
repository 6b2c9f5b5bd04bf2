/**
 * Kubernetes quantity parsing, restricted to what extended resources allow: whole numbers.
 * Pure arithmetic on BigInt so `1k`, `1e3` and `1000` agree exactly and nothing rounds.
 */

const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m|u|n))?$/;

const BINARY: Record<string, bigint> = {
  Ki: 1n << 10n,
  Mi: 1n << 20n,
  Gi: 1n << 30n,
  Ti: 1n << 40n,
  Pi: 1n << 50n,
  Ei: 1n << 60n,
};
const DECIMAL_EXP: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

export type QuantityResult = { ok: true; value: number } | { ok: false; reason: 'syntax' | 'fraction' | 'too-large' };

/** Parses a quantity that must be a whole number (extended resources, annotation counts). */
export function parseWholeQuantity(input: unknown): QuantityResult {
  const text = typeof input === 'number' ? String(input) : input;
  if (typeof text !== 'string') return { ok: false, reason: 'syntax' };
  const m = QUANTITY.exec(text.trim());
  if (!m) return { ok: false, reason: 'syntax' };
  const [, sign, digits = '', exponent, suffix] = m;
  const [intPart = '', fracPart = ''] = digits.split('.');
  let numerator = BigInt((intPart || '0') + fracPart);
  let scale = -fracPart.length; // value = numerator * 10^scale * binaryFactor
  let binary = 1n;
  if (exponent) scale += Number(exponent.slice(1));
  if (suffix && suffix in BINARY) binary = BINARY[suffix] as bigint;
  else if (suffix) scale += DECIMAL_EXP[suffix] as number;
  if (sign === '-') numerator = -numerator;
  numerator *= binary;
  if (scale >= 0) {
    if (scale > 30) return { ok: false, reason: 'too-large' };
    numerator *= 10n ** BigInt(scale);
  } else {
    const divisor = 10n ** BigInt(-scale);
    if (numerator % divisor !== 0n) return { ok: false, reason: 'fraction' };
    numerator /= divisor;
  }
  if (numerator > BigInt(Number.MAX_SAFE_INTEGER) || numerator < -BigInt(Number.MAX_SAFE_INTEGER)) {
    return { ok: false, reason: 'too-large' };
  }
  return { ok: true, value: Number(numerator) };
}

/** `vcuda-core`: 1..99 is a share of one card, 100·k is k whole cards. */
export type CoreQuantity = { kind: 'share'; percent: number } | { kind: 'whole'; cards: number };

export function classifyCore(value: number): CoreQuantity | undefined {
  if (!Number.isInteger(value) || value <= 0) return undefined;
  if (value < 100) return { kind: 'share', percent: value };
  if (value % 100 === 0) return { kind: 'whole', cards: value / 100 };
  return undefined;
}

export const MIB = 1024 * 1024;

/** Parses `4GiB`, `512MiB`, `4096` (MiB) into bytes; used by operator CLIs, not by pod specs. */
export function parseByteSize(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB)?$/i.exec(text.trim());
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = (m[2] ?? 'MiB').toLowerCase();
  const factor = { b: 1, kib: 1024, mib: MIB, gib: 1024 * MIB, tib: 1024 * 1024 * MIB }[unit];
  if (factor === undefined) return undefined;
  const bytes = n * factor;
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}
