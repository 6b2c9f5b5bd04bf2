/**
 * The launch hook's in-flight bound, end to end on the fake GPU: a tenant under the libvcuda
 * preload launches behind another process's second of queued work. Its kernels cannot complete
 * before that backlog drains, so with the bound it stops after about one cap of queued work
 * (hard 50 %: 10 ms of estimated GPU time, some 60 launches at the 200 µs first guess) instead of
 * banking everything its bucket allows (~1250 launches in half a second), which would later run
 * in the other tenant's time. No sampler: the bound needs none.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeLimitConfig } from '../../contract/limit-config.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const build = join(root, 'native/build');
const dir = mkdtempSync(join(tmpdir(), 'vcuda-inflight-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The fake driver's device 0. */
const FAKE_UUID = 'GPU-fa4e6770-0000-4000-8000-000000000000';

function finish(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('error', reject);
    // 'close', not 'exit': the process can exit before its last output has been read.
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`exited with ${code}: ${out}`))));
  });
}

describe('in-flight bound', () => {
  it('stops a tenant from banking work behind a backlog it cannot see the end of', async () => {
    const env = {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      FAKEGPU_STATE: join(dir, 'fakegpu.state'),
      FAKEGPU_DEVICES: '1x81559',
      FAKEGPU_SMS: '16',
      FAKEGPU_KERNEL_US: '10',
      LD_LIBRARY_PATH: join(build, 'fake'),
    };
    const config = join(dir, 'tenant.conf');
    writeFileSync(
      config,
      encodeLimitConfig({
        podUid: 'pod-inflight',
        containerName: 'tenant',
        regionPath: join(dir, 'tenant.region'),
        writtenAtMs: Date.now(),
        devices: [
          {
            uuid: FAKE_UUID,
            hostIndex: 0,
            mode: 'hard',
            memoryLimitBytes: 2 ** 30,
            coreRequest: 50,
            coreLimit: 50,
          },
        ],
      }),
    );
    const client = join(build, 'test/compute_client');
    // 1 ms kernels (100 waves of 10 µs on 16 SMs), queued up to the fake's 1024 per stream: a
    // second of backlog ahead of anything launched after it, for a second and a half.
    const hog = spawn(client, ['storm', String(16 * 100), '1.5'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    const hogDone = finish(hog);
    await new Promise((r) => setTimeout(r, 200));
    // 170 µs kernels; the tenant gives up launching after half a second (it checks between
    // batches of 16, and a held launch returns when the bound lets it).
    const tenant = spawn(client, ['storm', '264', '0.5'], {
      env: { ...env, LD_PRELOAD: join(build, 'libvcuda.so'), VCUDA_CONFIG: config },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const launches = Number(/launches (\d+)/.exec(await finish(tenant))?.[1] ?? Number.NaN);
    await hogDone;
    // One cap (10 ms at 200 µs) plus the quarter cap between checks and the batch in progress;
    // without the bound the bucket alone admits about 1250 in the half second.
    expect(launches).toBeGreaterThan(0);
    expect(launches).toBeLessThan(300);
  }, 30_000);
});
