/** `vcuda config write|show`: operators' and tests' access to the native limit file. */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import {
  type DeviceLimit,
  decodeLimitConfig,
  encodeLimitConfig,
  parseByteSize,
  VcudaError,
} from '../contract/index.js';

/** Parses `0:memory=4GiB,memory-limit=8GiB,core=30,limit=50,mode=hard[,uuid=GPU-…]`. */
export function parseDeviceSpec(spec: string): DeviceLimit {
  const m = /^(\d+):(.*)$/.exec(spec);
  if (!m) throw new VcudaError('invalid', `--device ${spec}: expected INDEX:key=value,...`);
  const hostIndex = Number(m[1]);
  const fields = new Map<string, string>();
  for (const part of (m[2] ?? '').split(',').filter(Boolean)) {
    const [k, v] = part.split('=');
    if (!k || v === undefined) throw new VcudaError('invalid', `--device ${spec}: "${part}" is not key=value`);
    fields.set(k.trim(), v.trim());
  }
  const known = new Set(['memory', 'memory-limit', 'core', 'limit', 'mode', 'uuid']);
  for (const k of fields.keys()) {
    if (!known.has(k))
      throw new VcudaError(
        'invalid',
        `--device ${spec}: unknown key "${k}" (memory, memory-limit, core, limit, mode, uuid)`,
      );
  }
  const memory = fields.get('memory');
  const memoryLimitBytes = memory === undefined ? undefined : parseByteSize(memory);
  if (memoryLimitBytes === undefined) {
    throw new VcudaError('invalid', `--device ${spec}: memory must be a size such as 4GiB or 512MiB`);
  }
  const memoryBurstLimitBytes = burstLimitOf(spec, fields.get('memory-limit'), memoryLimitBytes);
  const percent = (key: 'core' | 'limit', fallback: number): number => {
    const raw = fields.get(key);
    const value = raw === undefined ? fallback : Number(raw);
    if (!Number.isInteger(value) || value < 1 || value > 100)
      throw new VcudaError(
        'invalid',
        `--device ${spec}: ${key} must be a whole percent of the card, 1..100, not "${raw}"`,
      );
    return value;
  };
  const coreRequest = percent('core', 100);
  const coreLimit = percent('limit', coreRequest);
  if (coreLimit < coreRequest)
    throw new VcudaError('invalid', `--device ${spec}: limit ${coreLimit} is below core ${coreRequest}`);
  const mode = fields.get('mode') ?? (coreLimit > coreRequest ? 'soft' : 'hard');
  if (mode !== 'hard' && mode !== 'soft') throw new VcudaError('invalid', `--device ${spec}: mode is hard or soft`);
  const uuid = fields.get('uuid');
  // libvcuda finds its card by UUID; a made-up one matches no card and every allocation is refused.
  if (!uuid?.startsWith('GPU-'))
    throw new VcudaError(
      'invalid',
      `--device ${spec}: uuid=GPU-… is required (the card's UUID, as nvidia-smi -L prints it)`,
    );
  return {
    uuid,
    hostIndex,
    mode,
    memoryLimitBytes,
    coreRequest,
    coreLimit,
    ...(memoryBurstLimitBytes === undefined ? {} : { memoryBurstLimitBytes }),
  };
}

/** `memory-limit=`: the burst ceiling; equal to memory means no burst, below it is refused. */
function burstLimitOf(spec: string, raw: string | undefined, memoryBytes: number): number | undefined {
  if (raw === undefined) return undefined;
  const bytes = parseByteSize(raw);
  if (bytes === undefined)
    throw new VcudaError('invalid', `--device ${spec}: memory-limit must be a size such as 8GiB or 512MiB`);
  if (bytes < memoryBytes)
    throw new VcudaError('invalid', `--device ${spec}: memory-limit ${raw} is below memory (the guaranteed amount)`);
  return bytes > memoryBytes ? bytes : undefined;
}

export function registerConfigCommand(program: Command): void {
  const config = program.command('config').description('write or show a container limit file (native format)');
  config
    .command('write')
    .description('write a limit file')
    .requiredOption('--out <file>', 'where to write it')
    .requiredOption('--region <path>', "the container's shared accounting region file")
    .option('--device <spec...>', 'INDEX:memory=4GiB[,memory-limit=8GiB],core=30,limit=50,mode=hard,uuid=GPU-…', [])
    .option('--pod-uid <uid>', 'pod UID', '')
    .option('--container <name>', 'container name', '')
    .action((opts: { out: string; region: string; device: string[]; podUid: string; container: string }) => {
      const buf = encodeLimitConfig({
        podUid: opts.podUid,
        containerName: opts.container,
        regionPath: opts.region,
        writtenAtMs: Date.now(),
        devices: opts.device.map(parseDeviceSpec),
      });
      // A running container maps this file: replace it whole (rename), never truncate it in place.
      const staging = `${opts.out}.${process.pid}.tmp`;
      writeFileSync(staging, buf);
      renameSync(staging, opts.out);
      process.stdout.write(`wrote ${opts.out} (${buf.length} bytes, ${opts.device.length} devices)\n`);
    });
  config
    .command('show')
    .description('print a limit file')
    .argument('<file>')
    .option('--json', 'print JSON')
    .action((file: string, opts: { json?: boolean }) => {
      const c = decodeLimitConfig(readFileSync(file));
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ ...c, seq: Number(c.seq) }, null, 2)}\n`);
        return;
      }
      process.stdout.write(`pod ${c.podUid || '-'} container ${c.containerName || '-'}\nregion ${c.regionPath}\n`);
      for (const d of c.devices) {
        const mib = (d.memoryLimitBytes / 1048576).toFixed(0);
        const burst = d.memoryBurstLimitBytes
          ? ` memory-limit ${(d.memoryBurstLimitBytes / 1048576).toFixed(0)} MiB`
          : '';
        process.stdout.write(
          `device ${d.hostIndex} ${d.uuid} memory ${mib} MiB${burst} core ${d.coreRequest} limit ${d.coreLimit} ${d.mode}\n`,
        );
      }
    });
}
