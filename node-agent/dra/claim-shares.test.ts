import { describe, expect, it } from 'vitest';
import { claim, GiB } from '../../test/support/node-agent/dra-claim.js';
import {
  ClaimRefused,
  deviceLimitsOf,
  driverResults,
  type PoolDevice,
  type ShareContext,
  sharesOfClaim,
} from './claim-shares.js';

const CARD = 80 * GiB;
const device = (i: number, healthy = true): PoolDevice => ({
  name: `gpu-${i}`,
  uuid: `GPU-0000000${i}-0000-4000-8000-000000000000`,
  index: i,
  minorNumber: i,
  memoryBytes: CARD,
  healthy,
});
const ctx = (held: [string, number, number][] = [], sick = false) => ({
  driver: 'gpu.vcuda.io',
  pool: 'node-1',
  devices: new Map([device(0), device(1, !sick)].map((d) => [d.name, d])),
  heldByOthers: new Map(held.map(([d, cores, memoryBytes]) => [d, { cores, memoryBytes }])),
});
const sharesOf = (
  ref: ReturnType<ReturnType<typeof claim>['ref']>,
  obj: ReturnType<ReturnType<typeof claim>['obj']>,
  context: ShareContext,
) => sharesOfClaim(ref, obj, driverResults(ref, obj, context.driver), context);
const parse = (c: ReturnType<typeof claim>) => sharesOf(c.ref(), c.obj(), ctx());

describe('sharesOfClaim', () => {
  it('a 30-core 8 GiB share becomes a hard limit of 30 and 8 GiB on its card', () => {
    const c = claim('c').share('gpu-1', 30, 8 * GiB);
    const shares = parse(c);
    expect(shares).toEqual([
      expect.objectContaining({
        device: 'gpu-1',
        uuid: device(1).uuid,
        cores: 30,
        memoryBytes: 8 * GiB,
        coreLimit: 30,
        shareId: expect.any(String),
      }),
    ]);
    expect(deviceLimitsOf('c', shares)).toEqual([
      { uuid: device(1).uuid, hostIndex: 1, mode: 'hard', memoryLimitBytes: 8 * GiB, coreRequest: 30, coreLimit: 30 },
    ]);
  });

  it('a whole card is hard at 100 (unthrottled) with all its memory; count 2 gives two cards', () => {
    const shares = parse(claim('w').share('gpu-0', 100, CARD).share('gpu-1', 100, CARD));
    expect(deviceLimitsOf('w', shares).map((d) => [d.hostIndex, d.mode, d.coreLimit, d.memoryLimitBytes])).toEqual([
      [0, 'hard', 100, CARD],
      [1, 'hard', 100, CARD],
    ]);
  });

  it('the opaque config gives a soft limit, per request when it names requests', () => {
    const c = claim('s').share('gpu-0', 20, GiB).share('gpu-1', 20, GiB).softLimit(60, ['gpu1']);
    const limits = deviceLimitsOf('s', parse(c));
    expect(limits.map((d) => [d.mode, d.coreRequest, d.coreLimit])).toEqual([
      ['hard', 20, 20],
      ['soft', 20, 60],
    ]);
  });

  it('two requests on one card add up into one record', () => {
    const limits = deviceLimitsOf(
      't',
      parse(
        claim('t')
          .share('gpu-0', 20, GiB)
          .share('gpu-0', 30, 2 * GiB),
      ),
    );
    expect(limits).toEqual([
      expect.objectContaining({ hostIndex: 0, coreRequest: 50, coreLimit: 50, memoryLimitBytes: 3 * GiB }),
    ]);
  });

  it('ignores results of other drivers', () => {
    const c = claim('o').share('gpu-0', 10, GiB).share('nic-0', 1, 1, { driver: 'net.example.com' });
    expect(parse(c).map((s) => s.device)).toEqual(['gpu-0']);
  });

  const refusals: [
    string,
    () => { c: ReturnType<typeof claim>; ref?: object; ctx?: ReturnType<typeof ctx> },
    RegExp,
  ][] = [
    ['uid mismatch', () => ({ c: claim('u').share('gpu-0', 10, GiB), ref: { uid: 'other' } }), /API server has uid/],
    ['not allocated', () => ({ c: claim('n') }), /no device of driver gpu.vcuda.io/],
    [
      'driver mismatch',
      () => ({ c: claim('d', { driver: 'gpu.example.com' }).share('gpu-0', 10, GiB) }),
      /no device of driver/,
    ],
    [
      'another node',
      () => ({ c: claim('p', { pool: 'node-2' }).share('gpu-0', 10, GiB) }),
      /names pool node-2, not this node's/,
    ],
    ['device not in the slice', () => ({ c: claim('x').share('gpu-7', 10, GiB) }), /not in this node's ResourceSlice/],
    [
      'cores over the device',
      () => ({ c: claim('o').share('gpu-0', 101, GiB) }),
      /consumedCapacity.cores 101 is more than the device has/,
    ],
    [
      'memory over the device',
      () => ({ c: claim('m').share('gpu-0', 10, CARD + 1) }),
      /consumedCapacity.memory .* more than the device has/,
    ],
    [
      'fractional cores',
      () => ({ c: claim('f').share('gpu-0', 10, GiB, { consumedCapacity: { cores: '10500m', memory: '1Gi' } }) }),
      /not a whole positive quantity/,
    ],
    [
      'no consumedCapacity',
      () => ({ c: claim('z').share('gpu-0', 10, GiB, { consumedCapacity: undefined }) }),
      /records no consumedCapacity.cores/,
    ],
    [
      'overcommit with prepared claims',
      () => ({ c: claim('oc').share('gpu-0', 40, GiB), ctx: ctx([['gpu-0', 70, GiB]]) }),
      /would overcommit card/,
    ],
    ['unhealthy card', () => ({ c: claim('h').share('gpu-1', 10, GiB), ctx: ctx([], true) }), /is unhealthy/],
    [
      'soft limit below the request',
      () => ({ c: claim('sl').share('gpu-0', 50, GiB).softLimit(40) }),
      /coreLimit 40 is below its 50 cores/,
    ],
    [
      'bad opaque config',
      () => ({
        c: claim('bc')
          .share('gpu-0', 10, GiB)
          .rawConfig({ apiVersion: 'gpu.vcuda.io/v1alpha1', kind: 'GpuShareConfig', coreLimit: 300, extra: 1 }),
      }),
      /its GpuShareConfig is invalid/,
    ],
  ];
  it.each(refusals)('refuses a claim: %s', (_name, make, message) => {
    const { c, ref, ctx: context } = make();
    const run = () => sharesOf({ ...c.ref(), ...ref }, c.obj(), context ?? ctx());
    expect(run).toThrow(ClaimRefused);
    expect(run).toThrow(message);
  });

  it('names each bad field of the opaque config', () => {
    const c = claim('bc')
      .share('gpu-0', 10, GiB)
      .rawConfig({ apiVersion: 'gpu.vcuda.io/v1alpha1', kind: 'GpuShareConfig', coreLimit: 300, extra: 1 });
    expect(() => parse(c)).toThrow(/status\.allocation\.devices\.config\[0\]\.opaque\.parameters\.coreLimit/);
    expect(() => parse(c)).toThrow(/extra/);
  });
});
