/**
 * What the node agent's host-pid map costs per period: one /proc scan plus one map per GPU
 * container. Scenario: a busy node with 2,000 processes, 20 GPU containers of 10 processes each
 * (fixture /proc, so the figure does not depend on this machine), and the same scan over this
 * machine's real /proc for scale. Target: <= 50 ms per publication (5% of one core at the 1 s
 * period).
 */
import { mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REGION_FILE_SIZE, REGION_MAGIC } from '../../contract/region-layout.js';
import type { PodView } from '../../node-agent/allocation/pod-view.js';
import type { ContainerRecord } from '../../node-agent/allocation/ports.js';
import { createHostPidPublisher, procSource } from '../../node-agent/card-sampling/host-pids.js';
import { containerKey, placementOf, procCgroupReader } from '../../node-agent/card-sampling/placement.js';
import { atMost, type Benchmark, percentile } from './harness.js';

const PROCESSES = 2000;
const CONTAINERS = 20;
const PER_CONTAINER = 10;
const RUNS = 30;

function uidOf(i: number): string {
  return `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
}

function buildFixture(root: string) {
  const proc = join(root, 'proc');
  const records: ContainerRecord[] = [];
  const pods: PodView[] = [];
  let pid = 1000;
  const writeProc = (cgroup: string, nsPid: number) => {
    const dir = join(proc, String(pid));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'cgroup'), cgroup);
    writeFileSync(join(dir, 'status'), `Name:\tpython\nNSpid:\t${pid}\t${nsPid}\n`);
    writeFileSync(join(dir, 'stat'), `${pid} (python) S ${Array(18).fill('0').join(' ')} ${pid * 7} 0\n`);
    pid++;
  };
  for (let c = 0; c < CONTAINERS; c++) {
    const uid = uidOf(c);
    const cid = c.toString(16).padStart(64, 'a');
    const regionPath = join(root, `region-${c}`);
    const buf = Buffer.alloc(8192);
    buf.write(REGION_MAGIC, 0, 'latin1');
    writeFileSync(regionPath, buf);
    truncateSync(regionPath, REGION_FILE_SIZE);
    records.push({ podUid: uid, container: 'main', paths: { regionPath }, devices: [] } as unknown as ContainerRecord);
    pods.push({ uid, containerIds: { main: cid } } as unknown as PodView);
    const cgroup = `0::/kubepods.slice/kubepods-pod${uid.replace(/-/g, '_')}.slice/cri-containerd-${cid}.scope\n`;
    for (let p = 0; p < PER_CONTAINER; p++) writeProc(cgroup, p + 1);
  }
  while (pid < 1000 + PROCESSES) writeProc('0::/system.slice/some.service\n', pid);
  return { proc, records, pods };
}

function timeRuns(fn: () => void): number[] {
  fn(); // warm-up
  const out: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    fn();
    out.push(performance.now() - t0);
  }
  return out.sort((a, b) => a - b);
}

const benchmark: Benchmark = {
  name: 'host-pids',
  description: "node agent's host-pid map: one /proc scan and every GPU container's map per period",
  async run(ctx) {
    const root = mkdtempSync(join(tmpdir(), 'vcuda-bench-host-pids-'));
    try {
      const { proc, records, pods } = buildFixture(root);
      const placement = placementOf(
        () => records,
        () => pods,
        () => 0,
        procCgroupReader(proc),
      );
      const targets = records.map((r) => ({
        key: containerKey(r.podUid, r.container),
        podUid: r.podUid,
        regionPath: r.paths.regionPath,
      }));
      const publisher = createHostPidPublisher({
        targets: () => targets,
        proc: procSource(proc),
        containerOfPid: (pid) => placement.containerOfPid(pid),
        nowMs: () => Date.now(),
      });
      let written = 0;
      const fixture = timeRuns(() => {
        written = publisher.publishOnce();
      });
      ctx.log(`fixture: ${written} maps written per publication`);
      // This machine's /proc, with targets that match nothing: the scan alone.
      const real = procSource('/proc');
      const realCount = real.pids().length;
      const scan = timeRuns(() => {
        createHostPidPublisher({
          targets: () => [{ key: 'none', podUid: uidOf(999_999), regionPath: join(root, 'absent') }],
          proc: real,
          containerOfPid: () => null,
          nowMs: () => Date.now(),
        }).publishOnce();
      });
      const p50 = percentile(fixture, 50);
      return [
        {
          name: 'publish_ms_p50',
          value: Number(p50.toFixed(2)),
          unit: 'ms',
          scenario: `${PROCESSES} processes, ${CONTAINERS} GPU containers x ${PER_CONTAINER}`,
          ...atMost(p50, 50),
        },
        {
          name: 'publish_ms_p99',
          value: Number(percentile(fixture, 99).toFixed(2)),
          unit: 'ms',
          scenario: `${PROCESSES} processes, ${CONTAINERS} GPU containers x ${PER_CONTAINER}`,
        },
        {
          name: 'scan_ms_p50_this_machine',
          value: Number(percentile(scan, 50).toFixed(2)),
          unit: 'ms',
          scenario: `this machine's /proc (${realCount} processes), no GPU container`,
        },
      ];
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  },
};

export default benchmark;
