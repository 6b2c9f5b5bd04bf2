/**
 * Consumable capacity (KEP-5075, beta in 1.36) for one device and one request, as kube-scheduler's
 * allocator computes it: every capacity of the device is consumed, the requested ones rounded up
 * by the requestPolicy (validRange min and step, or the next validValue), the unrequested ones at
 * the policy's default or else the whole value; a consumption the policy does not allow (above
 * max, off the step, not a valid value) or that the device's remaining capacity cannot hold does
 * not fit. Pure arithmetic on exact quantities.
 */
import { type DraQuantity, formatDraQuantity, parseDraQuantity, roundUpToRange } from '../../contract/dra-quantity.js';
import type { CapacityRequestPolicy, DeviceCapacity, SliceDevice } from './dra-objects.js';

/** What a device has given out already, per capacity name, in thousandths. */
export type CapacityUsage = Map<string, bigint>;

function must(text: string | undefined): DraQuantity | undefined {
  return text === undefined ? undefined : parseDraQuantity(text);
}

/** The consumption of one capacity for a request of `requested` (undefined: not requested). */
function consumedOf(requested: DraQuantity | undefined, cap: DeviceCapacity): DraQuantity | undefined {
  const policy = cap.requestPolicy;
  if (!requested) return must(policy?.default) ?? must(cap.value);
  if (!policy) return requested;
  const min = must(policy.validRange?.min);
  if (min) return roundUpToRange(requested, min, must(policy.validRange?.step));
  if (policy.validValues) {
    for (const v of policy.validValues) {
      const valid = must(v);
      if (valid && requested.milli <= valid.milli) return valid;
    }
  }
  return requested;
}

function violatesPolicy(consumed: DraQuantity, policy: CapacityRequestPolicy | undefined): boolean {
  if (!policy) return false;
  if (policy.default !== undefined && must(policy.default)?.milli === consumed.milli) return false;
  const range = policy.validRange;
  if (range) {
    const max = must(range.max);
    if (max && consumed.milli > max.milli) return true;
    const step = must(range.step);
    const min = must(range.min) ?? { milli: 0n };
    return step !== undefined && step.milli > 0n && (consumed.milli - min.milli) % step.milli !== 0n;
  }
  if (policy.validValues?.length) return !policy.validValues.some((v) => must(v)?.milli === consumed.milli);
  return false;
}

export type Consumption = { ok: true; consumed: Map<string, DraQuantity> } | { ok: false; reason: string };

/**
 * What `requests` consume of a device that allows several allocations, given what it has given
 * out (`used`); or why it does not fit.
 */
export function consumeCapacity(
  device: SliceDevice,
  requests: Record<string, string> | undefined,
  used: CapacityUsage | undefined,
): Consumption {
  const capacity = device.capacity ?? {};
  for (const name of Object.keys(requests ?? {})) {
    if (!(name in capacity)) return { ok: false, reason: `device ${device.name} has no capacity "${name}"` };
  }
  const consumed = new Map<string, DraQuantity>();
  for (const [name, cap] of Object.entries(capacity)) {
    const asked = requests?.[name];
    const requested = asked === undefined ? undefined : parseDraQuantity(asked);
    if (asked !== undefined && !requested) return { ok: false, reason: `capacity request ${name}: "${asked}"` };
    const value = parseDraQuantity(cap.value);
    const take = consumedOf(requested, cap);
    if (!value || !take) return { ok: false, reason: `device ${device.name}: capacity ${name} is not a quantity` };
    if (violatesPolicy(take, cap.requestPolicy)) {
      return {
        ok: false,
        reason: `${name} ${formatDraQuantity(take)} is outside device ${device.name}'s requestPolicy`,
      };
    }
    const free = value.milli - (used?.get(name) ?? 0n);
    if (take.milli > free) {
      const freeText = formatDraQuantity({ milli: free, format: value.format });
      return {
        ok: false,
        reason: `device ${device.name} has ${name} ${freeText} free, ${formatDraQuantity(take)} asked`,
      };
    }
    consumed.set(name, take);
  }
  return { ok: true, consumed };
}

/**
 * Whether an exclusive device (no allowMultipleAllocations) holds what `requests` ask: each named
 * capacity exists and is at least the request.
 */
export function holdsRequests(device: SliceDevice, requests: Record<string, string> | undefined): string | undefined {
  for (const [name, asked] of Object.entries(requests ?? {})) {
    const cap = device.capacity?.[name];
    if (!cap) return `device ${device.name} has no capacity "${name}"`;
    const value = parseDraQuantity(cap.value);
    const want = parseDraQuantity(asked);
    if (!value || !want || want.milli > value.milli)
      return `device ${device.name} has ${name} ${cap.value}, ${asked} asked`;
  }
  return undefined;
}

/** Adds (or, with `sign` -1, takes back) a consumption to a device's usage. */
export function addUsage(usage: CapacityUsage, consumed: ReadonlyMap<string, DraQuantity>, sign: 1n | -1n): void {
  for (const [name, q] of consumed) usage.set(name, (usage.get(name) ?? 0n) + sign * q.milli);
}
