/**
 * `vcuda compute limit|show`: change a running container's core limits in place, and see what its
 * compute limiter is doing (measured share, target, rate, learned per-launch cost).
 */
import type { Command } from 'commander';
import { VcudaError } from '../../contract/errors.js';
import { type DeviceLimitChange, updateLimitsInPlace } from './limit-update.js';
import { readComputeStates } from './limiter-state.js';

/** Parses `INDEX:core=30,limit=50[,mode=soft]` (INDEX = the device's record in the limit file). */
export function parseLimitChange(spec: string): [number, DeviceLimitChange] {
  const m = /^(\d+):(.+)$/.exec(spec);
  if (!m) throw new VcudaError('invalid', `--device ${spec}: expected INDEX:core=N,limit=M[,mode=hard|soft]`);
  const change: DeviceLimitChange = {};
  for (const part of (m[2] as string).split(',')) {
    const [key, value] = part.split('=').map((s) => s.trim());
    if (key === 'core' || key === 'limit') {
      const n = Number(value);
      if (!Number.isInteger(n)) throw new VcudaError('invalid', `--device ${spec}: ${key} must be an integer 1..100`);
      if (key === 'core') change.coreRequest = n;
      else change.coreLimit = n;
    } else if (key === 'mode' && (value === 'hard' || value === 'soft')) {
      change.mode = value;
    } else {
      throw new VcudaError('invalid', `--device ${spec}: "${part}" is not core=N, limit=N or mode=hard|soft`);
    }
  }
  return [Number(m[1]), change];
}

export function registerComputeCommand(program: Command): void {
  const compute = program.command('compute').description("a running container's compute limits");
  compute
    .command('limit')
    .description('change core request/limit in a limit file in place (takes effect without a restart)')
    .argument('<config>', 'the container limit file')
    .requiredOption('--device <spec...>', 'INDEX:core=30,limit=50[,mode=hard|soft]')
    .action((config: string, opts: { device: string[] }) => {
      const seq = updateLimitsInPlace(config, new Map(opts.device.map(parseLimitChange)), Date.now());
      process.stdout.write(`updated ${config} (seq ${seq})\n`);
    });
  compute
    .command('show')
    .description("print each device's measured share and limiter state from a region file")
    .argument('<region>', "the container's shared accounting region")
    .option('--json', 'print JSON')
    .action((region: string, opts: { json?: boolean }) => {
      const states = readComputeStates(region);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(states, null, 2)}\n`);
        return;
      }
      const pct = (bp: number) => `${(bp / 100).toFixed(1)}%`;
      for (const s of states) {
        process.stdout.write(
          `device ${s.deviceIndex}: measured ${pct(s.measuredShareBp)} of card (busy ${pct(s.cardBusyBp)}), ` +
            `target ${pct(s.targetBp)}, rate ${pct(s.rateBp)} (trim ${s.trimBp} bp), ` +
            `cost ${(s.costNs / 1000).toFixed(1)} µs/launch, held ${s.waitedMs.toFixed(0)} ms\n`,
        );
      }
    });
}
