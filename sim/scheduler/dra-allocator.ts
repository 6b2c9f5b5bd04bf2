/**
 * The simulated scheduler's DRA allocator: pure, over plain objects. Given one node's
 * ResourceSlices, the DeviceClasses, what every allocated claim holds and one claim, it returns the
 * allocation results kube-scheduler 1.36 would write (device, pool, driver, request, and for a
 * device that allows several allocations a new shareID and the consumedCapacity after the
 * requestPolicy's rounding), or why the claim does not fit on that node.
 *
 * What it supports is what vcuda's claims use: `exactly` requests with `count` (distinct devices
 * per request) or `allocationMode: All`, `capacity.requests`, `matchAttribute` and
 * `distinctAttribute` constraints, class and request selectors of the forms dra-selectors.ts reads,
 * and partitionable devices (KEP-4815: counter sets a device consumes, dra-counters.ts). `firstAvailable` and adminAccess are refused with a reason. Devices are
 * tried in the order kube-scheduler tries them (pools by driver and name, slices and devices in
 * order), and the search backtracks over the choices, as its allocator does.
 */
import { type DraQuantity, formatDraQuantity, parseDraQuantity } from '../../contract/dra-quantity.js';
import { addUsage, type CapacityUsage, consumeCapacity, holdsRequests } from './dra-capacity.js';
import { addCounters, type CounterAmounts, counterDemand, counterShortfall, poolCounters } from './dra-counters.js';
import type {
  AllocationResult,
  ClaimSpec,
  DeviceAttribute,
  DeviceClass,
  DeviceConstraint,
  ExactDeviceRequest,
  ResourceSlice,
  SliceDevice,
} from './dra-objects.js';
import { compileSelectors } from './dra-selectors.js';

export type AllocatorInput = {
  node: string;
  slices: readonly ResourceSlice[];
  classes: ReadonlyMap<string, DeviceClass>;
  /** The results of every claim allocated now (or being allocated), this claim's excluded. */
  allocated: readonly AllocationResult[];
  claim: { spec: ClaimSpec };
  newShareId: () => string;
};

/**
 * The results; or why not: `refused` when no node could serve the claim as written (a class that
 * does not exist, a selector or request form the simulator does not evaluate), else it does not fit here.
 */
export type AllocatorOutcome =
  | { ok: true; results: AllocationResult[]; config: unknown[] }
  | { ok: false; reason: string; refused?: boolean };

/** A device on the node, with where it comes from and the counters its pool defines. */
export type Candidate = { driver: string; pool: string; device: SliceDevice; counters: ReadonlyMap<string, bigint> };

/** One device to pick: a request's n-th device. */
type Slot = { request: string; exact: ExactDeviceRequest; candidates: Candidate[] };

/** How much of the search's work the allocator spends before giving up on a claim. */
const MAX_STEPS = 100_000;

const keyOf = (c: { driver: string; pool: string; device: string }) => `${c.driver}/${c.pool}/${c.device}`;
const candidateKey = (c: Candidate) => keyOf({ driver: c.driver, pool: c.pool, device: c.device.name });

/**
 * The devices published for `node`: each pool at its newest generation, and only when all its
 * slices are there (an incomplete pool is skipped, as kube-scheduler skips it).
 */
export function nodeCandidates(node: string, slices: readonly ResourceSlice[]): Candidate[] {
  const pools = new Map<string, ResourceSlice[]>();
  for (const s of slices) {
    if (s.spec.nodeName !== node && s.spec.allNodes !== true) continue;
    const key = `${s.spec.driver}\u0000${s.spec.pool.name}`;
    const held = pools.get(key);
    const generation = held?.[0]?.spec.pool.generation;
    if (!held || generation === undefined || s.spec.pool.generation > generation) pools.set(key, [s]);
    else if (s.spec.pool.generation === generation) held.push(s);
  }
  const out: Candidate[] = [];
  for (const key of [...pools.keys()].sort()) {
    const group = pools.get(key)!;
    if (group.length < (group[0]?.spec.pool.resourceSliceCount ?? 1)) continue;
    group.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    const counters = poolCounters(group);
    for (const s of group) {
      for (const device of s.spec.devices ?? [])
        out.push({ driver: s.spec.driver, pool: s.spec.pool.name, device, counters });
    }
  }
  return out;
}

/** What each device has given out: a map of capacity used, or `exclusive` when it is taken whole. */
type DeviceUsage = { exclusive: boolean; capacity: CapacityUsage };

function usageOf(allocated: readonly AllocationResult[]): Map<string, DeviceUsage> {
  const usage = new Map<string, DeviceUsage>();
  for (const r of allocated) {
    const u = usage.get(keyOf(r)) ?? { exclusive: false, capacity: new Map() };
    if (!r.shareID && !r.consumedCapacity) u.exclusive = true;
    for (const [name, text] of Object.entries(r.consumedCapacity ?? {})) {
      // A stored result's quantity was validated by the API server; an unreadable one counts as nothing.
      const milli = parseDraQuantity(text)?.milli ?? 0n;
      u.capacity.set(name, (u.capacity.get(name) ?? 0n) + milli);
    }
    usage.set(keyOf(r), u);
  }
  return usage;
}

/** The counters the node's allocated devices consume (a result on another node's device consumes none here). */
function countersInUse(allocated: readonly AllocationResult[], candidates: readonly Candidate[]): CounterAmounts {
  const byKey = new Map(candidates.map((c) => [candidateKey(c), c]));
  const used: CounterAmounts = new Map();
  for (const r of allocated) {
    const c = byKey.get(keyOf(r));
    const demand = c ? counterDemand(c, c.counters) : undefined;
    if (demand && typeof demand !== 'string') addCounters(used, demand, 1n);
  }
  return used;
}

/** The slots of every request: `count` of them, or one per matching device for `All`; or why not. */
function slotsOf(input: AllocatorInput, candidates: Candidate[]): Slot[] | string {
  const slots: Slot[] = [];
  for (const request of input.claim.spec.devices?.requests ?? []) {
    const exact = request.exactly;
    if (!exact) return `request "${request.name}": firstAvailable is not supported by the simulator`;
    if (exact.adminAccess) return `request "${request.name}": adminAccess is not supported by the simulator`;
    const cls = input.classes.get(exact.deviceClassName);
    if (!cls) return `request "${request.name}": device class ${exact.deviceClassName} does not exist`;
    const byClass = compileSelectors(cls.spec?.selectors, `DeviceClass ${exact.deviceClassName}`);
    if (!byClass.ok) return byClass.reason;
    const byRequest = compileSelectors(exact.selectors, `request "${request.name}"`);
    if (!byRequest.ok) return byRequest.reason;
    const selectable = (c: Candidate) => ({ driver: c.driver, attributes: c.device.attributes ?? {} });
    const matching = candidates.filter((c) => byClass.matches(selectable(c)) && byRequest.matches(selectable(c)));
    // `All` with no device on the node is one slot nothing can fill: it does not fit here.
    const count = exact.allocationMode === 'All' ? Math.max(1, matching.length) : (exact.count ?? 1);
    for (let i = 0; i < count; i++) slots.push({ request: request.name, exact, candidates: matching });
  }
  return slots;
}

/** An attribute's value by its qualified name (`gpu.vcuda.io/uuid`); unqualified names are the driver's. */
function attributeOf(c: Candidate, qualified: string): string | undefined {
  const slash = qualified.indexOf('/');
  const domain = slash < 0 ? c.driver : qualified.slice(0, slash);
  const name = slash < 0 ? qualified : qualified.slice(slash + 1);
  const attrs = c.device.attributes ?? {};
  const a: DeviceAttribute | undefined = domain === c.driver ? (attrs[name] ?? attrs[qualified]) : attrs[qualified];
  if (!a) return undefined;
  return JSON.stringify([a.string, a.int, a.bool, a.version]);
}

/** Whether adding `c` for `request` keeps every constraint, given the devices chosen so far. */
function keepsConstraints(
  constraints: readonly DeviceConstraint[],
  chosen: readonly { request: string; candidate: Candidate }[],
  request: string,
  c: Candidate,
): boolean {
  for (const k of constraints) {
    const covers = (r: string) => !k.requests?.length || k.requests.includes(r);
    if (!covers(request)) continue;
    const attribute = k.matchAttribute ?? k.distinctAttribute;
    if (!attribute) continue;
    const mine = attributeOf(c, attribute);
    if (mine === undefined) return false;
    for (const other of chosen) {
      if (!covers(other.request)) continue;
      const theirs = attributeOf(other.candidate, attribute);
      if (k.matchAttribute && theirs !== mine) return false;
      if (k.distinctAttribute && theirs === mine) return false;
    }
  }
  return true;
}

type Pick = { request: string; candidate: Candidate; consumed?: Map<string, DraQuantity>; counters?: CounterAmounts };

type Search = {
  slots: Slot[];
  constraints: readonly DeviceConstraint[];
  usage: Map<string, DeviceUsage>;
  /** Counters the allocated and chosen devices consume. */
  counters: CounterAmounts;
  chosen: Pick[];
  steps: number;
  /** The last reason a device was passed over, for the refusal. */
  lastReason?: string;
};

/** Whether `c` can serve the slot now; its consumption when it is shared. */
function tryDevice(s: Search, slot: Slot, c: Candidate): Pick | undefined {
  const key = candidateKey(c);
  if (s.chosen.some((p) => p.request === slot.request && candidateKey(p.candidate) === key)) return undefined;
  if (!keepsConstraints(s.constraints, s.chosen, slot.request, c)) {
    s.lastReason = "the claim's constraints";
    return undefined;
  }
  const u = s.usage.get(key);
  if (u?.exclusive) return undefined;
  const requests = slot.exact.capacity?.requests;
  if (!c.device.allowMultipleAllocations) {
    if (u && u.capacity.size > 0) return undefined;
    const why = holdsRequests(c.device, requests);
    if (why) s.lastReason = why;
    if (why) return undefined;
    const demand = counterDemand(c, c.counters);
    const short = typeof demand === 'string' ? demand : counterShortfall(c.device.name, demand, s.counters, c.counters);
    if (short) s.lastReason = short;
    return short || typeof demand === 'string' ? undefined : { request: slot.request, candidate: c, counters: demand };
  }
  const out = consumeCapacity(c.device, requests, u?.capacity);
  if (!out.ok) {
    s.lastReason = out.reason;
    return undefined;
  }
  return { request: slot.request, candidate: c, consumed: out.consumed };
}

function take(s: Search, p: Pick, sign: 1n | -1n): void {
  const key = candidateKey(p.candidate);
  const u = s.usage.get(key) ?? { exclusive: false, capacity: new Map() };
  if (p.consumed) addUsage(u.capacity, p.consumed, sign);
  else u.exclusive = sign === 1n;
  if (p.counters) addCounters(s.counters, p.counters, sign);
  s.usage.set(key, u);
  if (sign === 1n) s.chosen.push(p);
  else s.chosen.pop();
}

/** Depth-first over the slots: the first device that fits each, backtracking when a later slot cannot be served. */
function search(s: Search, index: number): boolean {
  if (index === s.slots.length) return true;
  const slot = s.slots[index]!;
  for (const c of slot.candidates) {
    if (++s.steps > MAX_STEPS) return false;
    const pick = tryDevice(s, slot, c);
    if (!pick) continue;
    take(s, pick, 1n);
    if (search(s, index + 1)) return true;
    take(s, pick, -1n);
  }
  return false;
}

function resultOf(p: Pick, newShareId: () => string): AllocationResult {
  const c = p.candidate;
  const base = { request: p.request, driver: c.driver, pool: c.pool, device: c.device.name };
  if (!p.consumed) return base;
  const consumedCapacity: Record<string, string> = {};
  for (const [name, q] of p.consumed) consumedCapacity[name] = formatDraQuantity(q);
  return { ...base, shareID: newShareId(), consumedCapacity };
}

/** The device configuration the allocation carries: each request's class config, then the claim's own. */
function configOf(input: AllocatorInput): unknown[] {
  const config: unknown[] = [];
  for (const request of input.claim.spec.devices?.requests ?? []) {
    const cls = request.exactly ? input.classes.get(request.exactly.deviceClassName) : undefined;
    for (const entry of cls?.spec?.config ?? [])
      config.push({ source: 'FromClass', requests: [request.name], ...entry });
  }
  for (const entry of input.claim.spec.devices?.config ?? [])
    config.push({ source: 'FromClaim', ...(entry as object) });
  return config;
}

/** Allocates one claim on one node, or says why it does not fit there. */
export function allocateClaim(input: AllocatorInput): AllocatorOutcome {
  const candidates = nodeCandidates(input.node, input.slices);
  const slots = slotsOf(input, candidates);
  if (typeof slots === 'string') return { ok: false, reason: slots, refused: true };
  const s: Search = {
    slots,
    constraints: input.claim.spec.devices?.constraints ?? [],
    usage: usageOf(input.allocated),
    counters: countersInUse(input.allocated, candidates),
    chosen: [],
    steps: 0,
  };
  if (!search(s, 0)) {
    const names = [...new Set(slots.map((x) => x.request))].join(', ');
    const why = s.steps > MAX_STEPS ? 'the search gave up' : (s.lastReason ?? 'no matching device');
    return { ok: false, reason: `node ${input.node} cannot allocate request(s) ${names}: ${why}` };
  }
  return { ok: true, results: s.chosen.map((p) => resultOf(p, input.newShareId)), config: configOf(input) };
}
