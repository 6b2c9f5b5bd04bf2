/**
 * Kubernetes quantities as DRA's consumable capacity uses them: exact values in thousandths
 * (BigInt, so `24Gi` and `8000M` never round), the format a quantity keeps (binary `Mi`/`Gi`
 * or decimal `k`/`M`/`G`), the canonical text kube-apiserver writes back (`8000M` → `8G`,
 * `7630Mi`), and a requestPolicy's validRange rounding (`min + ⌈(request − min) / step⌉ · step`,
 * in the step's format), as the allocator in kube-scheduler 1.36 computes `consumedCapacity`.
 */

const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m|u|n))?$/;

const BINARY_SUFFIXES = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];
const DECIMAL_SUFFIXES = ['', 'k', 'M', 'G', 'T', 'P', 'E'];
const DECIMAL_EXP: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

export type QuantityFormat = 'BinarySI' | 'DecimalSI';

/** A quantity's exact value in thousandths of its unit, and the format it is written back in. */
export type DraQuantity = { milli: bigint; format: QuantityFormat };

/** Beyond this many digits a quantity is refused rather than carried (kube-apiserver caps them too). */
const MAX_DIGITS = 40;

/**
 * Parses a quantity; undefined when it is not one. Fractions below a thousandth round up, as
 * kube-apiserver's MilliValue does.
 */
export function parseDraQuantity(input: unknown): DraQuantity | undefined {
  const text = typeof input === 'number' ? String(input) : input;
  if (typeof text !== 'string' || text.length > MAX_DIGITS) return undefined;
  const m = QUANTITY.exec(text.trim());
  if (!m) return undefined;
  const [, sign, digits = '', exponent, suffix] = m;
  const [intPart = '', fracPart = ''] = digits.split('.');
  let numerator = BigInt((intPart || '0') + fracPart) * (sign === '-' ? -1n : 1n);
  let scale = 3 - fracPart.length;
  const binaryIndex = suffix ? BINARY_SUFFIXES.indexOf(suffix) : -1;
  if (binaryIndex > 0) numerator *= 1n << BigInt(10 * binaryIndex);
  else if (suffix) scale += DECIMAL_EXP[suffix] as number;
  if (exponent) scale += Number(exponent.slice(1));
  if (scale > 30) return undefined;
  const format: QuantityFormat = binaryIndex > 0 ? 'BinarySI' : 'DecimalSI';
  if (scale >= 0) return { milli: numerator * 10n ** BigInt(scale), format };
  const divisor = 10n ** BigInt(-scale);
  const rounded = numerator / divisor + (numerator % divisor > 0n ? 1n : 0n);
  return { milli: rounded, format };
}

/** The canonical text of a quantity, as kube-apiserver writes it back (`8G`, `7630Mi`, `30`, `500m`). */
export function formatDraQuantity(q: DraQuantity): string {
  if (q.milli % 1000n !== 0n) return `${q.milli}m`;
  let value = q.milli / 1000n;
  const magnitude = value < 0n ? -value : value;
  if (q.format === 'BinarySI' && magnitude >= 1024n) {
    let exp = 0;
    while (exp < 6 && value % 1024n === 0n) {
      value /= 1024n;
      exp++;
    }
    return `${value}${BINARY_SUFFIXES[exp]}`;
  }
  let exp = 0;
  while (exp < 6 && value !== 0n && value % 1000n === 0n) {
    value /= 1000n;
    exp++;
  }
  return `${value}${DECIMAL_SUFFIXES[exp]}`;
}

/** Canonical text of a quantity's text; the input unchanged when it is not a quantity. */
export function canonicalDraQuantity(text: unknown): unknown {
  const q = parseDraQuantity(text);
  return q ? formatDraQuantity(q) : text;
}

/**
 * A request rounded up into a validRange: below `min` it is `min`; with a step it is the next
 * `min + n·step` at or above it, in the step's format; otherwise itself.
 */
export function roundUpToRange(request: DraQuantity, min: DraQuantity, step: DraQuantity | undefined): DraQuantity {
  if (request.milli < min.milli) return min;
  if (!step || step.milli <= 0n) return request;
  const added = request.milli - min.milli;
  const n = added / step.milli + (added % step.milli !== 0n ? 1n : 0n);
  return { milli: min.milli + n * step.milli, format: step.format };
}
