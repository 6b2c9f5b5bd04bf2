/**
 * Runs the C tests of native/ (against the fake driver) so `npm test` covers them, and checks the
 * limit-file format across languages: a file written by `vcuda config write` is read back by the
 * C reader (native/test/config_test FILE prints what it decoded).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeLimitConfig } from '../../contract/index.js';

const root = resolve(import.meta.dirname, '../..');
const build = join(root, 'native/build');
const tmp = mkdtempSync(join(tmpdir(), 'vcuda-native-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const cTests = readdirSync(join(build, 'test')).filter((f) => f.endsWith('_test'));

describe('native C tests', () => {
  it('are built', () => {
    expect(cTests).toEqual(expect.arrayContaining(['config_test', 'memory_test']));
  });
  it.each(cTests)('%s passes', (name) => {
    const run = spawnSync(join(build, 'test', name), [], {
      env: { ...process.env, VC_BUILD: build, VC_NATIVE: join(root, 'native') },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.stderr.split('\n').filter((l) => l.startsWith('FAIL'))).toEqual([]);
    expect(run.status).toBe(0);
  });
});

describe('limit file across languages', () => {
  it('the C reader decodes what vcuda config write wrote', { timeout: 60_000 }, () => {
    const file = join(tmp, 'vcuda.conf');
    execFileSync(
      process.execPath,
      [
        join(root, 'bin/vcuda.js'),
        'config',
        'write',
        '--out',
        file,
        '--region',
        '/run/vcuda/pod-1/main.region',
        '--pod-uid',
        'pod-1',
        '--container',
        'main',
        '--device',
        '0:memory=4GiB,memory-limit=6GiB,core=30,limit=50,mode=soft,uuid=GPU-fa4e6770-0000-4000-8000-000000000000',
        '--device',
        '3:memory=512MiB,core=20,uuid=GPU-0000000f-0000-4000-8000-000000000003',
      ],
      { encoding: 'utf8' },
    );
    const decoded = JSON.parse(execFileSync(join(build, 'test/config_test'), [file], { encoding: 'utf8' }));
    expect(decoded).toEqual({
      podUid: 'pod-1',
      containerName: 'main',
      regionPath: '/run/vcuda/pod-1/main.region',
      seq: 0,
      devices: [
        {
          uuid: 'GPU-fa4e6770-0000-4000-8000-000000000000',
          hostIndex: 0,
          mode: 'soft',
          memoryLimitBytes: 4 * 2 ** 30,
          coreRequest: 30,
          coreLimit: 50,
          memoryBurstLimitBytes: 6 * 2 ** 30,
        },
        {
          uuid: 'GPU-0000000f-0000-4000-8000-000000000003',
          hostIndex: 3,
          mode: 'hard',
          memoryLimitBytes: 512 * 2 ** 20,
          coreRequest: 20,
          coreLimit: 20,
        },
      ],
    });
  });

  it('the C reader refuses a file the writer did not produce', () => {
    const file = join(tmp, 'garbage.conf');
    execFileSync('sh', ['-c', `head -c 640 /dev/zero > ${file}`]);
    const run = spawnSync(join(build, 'test/config_test'), [file], { encoding: 'utf8' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('bad magic');
  });
});

describe('a limit file written by TypeScript is enforced by libvcuda', () => {
  it('allows up to the limit and refuses past it', () => {
    const config = join(tmp, 'enforced.conf');
    writeFileSync(
      config,
      encodeLimitConfig({
        podUid: 'pod-2',
        containerName: 'main',
        regionPath: join(tmp, 'enforced.region'),
        writtenAtMs: Date.now(),
        devices: [
          {
            uuid: 'GPU-fa4e6770-0000-4000-8000-000000000000',
            hostIndex: 0,
            mode: 'hard',
            memoryLimitBytes: 32 * 2 ** 20,
            coreRequest: 30,
            coreLimit: 30,
          },
        ],
      }),
    );
    const env = {
      ...process.env,
      LD_PRELOAD: join(build, 'libvcuda.so'),
      LD_LIBRARY_PATH: join(build, 'fake'),
      FAKEGPU_STATE: join(tmp, 'enforced.fakegpu'),
      FAKEGPU_DEVICES: '1x1024',
      VCUDA_CONFIG: config,
      VCUDA_CONTEXT_OVERHEAD_MIB: '0',
    };
    const tryMiB = (mib: number) =>
      spawnSync(join(build, 'test/mem_client'), ['try', String(mib)], { env, encoding: 'utf8' }).status;
    expect(tryMiB(32)).toBe(0);
    expect(tryMiB(33)).toBe(3); // CUDA_ERROR_OUT_OF_MEMORY
  });

  it('vcuda config write --device 0:memory=1GiB,memory-limit=2GiB gives a container that bursts to 2 GiB', () => {
    const write = (name: string, device: string) => {
      const out = join(tmp, `${name}.conf`);
      const args = ['config', 'write', '--out', out, '--region', join(tmp, `${name}.region`), '--device', device];
      execFileSync(process.execPath, [join(root, 'bin/vcuda.js'), ...args], { encoding: 'utf8' });
      return out;
    };
    const uuid = 'uuid=GPU-fa4e6770-0000-4000-8000-000000000000';
    const card = { FAKEGPU_STATE: join(tmp, 'burst.fakegpu'), FAKEGPU_DEVICES: '1x2048' };
    const env = (config: string) => ({
      ...process.env,
      ...card,
      LD_PRELOAD: join(build, 'libvcuda.so'),
      LD_LIBRARY_PATH: join(build, 'fake'),
      VCUDA_CONFIG: config,
      VCUDA_CONTEXT_OVERHEAD_MIB: '0',
    });
    const first = write('bursting', `0:memory=1GiB,memory-limit=2GiB,core=50,${uuid}`);
    const second = write('guaranteed', `0:memory=1GiB,core=50,${uuid}`);
    // 1.5 GiB through cuMemAlloc, refused past 2 GiB, the views at the guarantee (README): total 1 GiB,
    // free what the ceiling leaves beside the burst; every operation exits non-zero when it is not so.
    const ops = ['a:1536', 'A:513', 'd:1024', 'i:512:1024', 'n:512:1024'];
    const run = spawnSync(join(build, 'test/burst_client'), ops, { env: env(first), encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const neighbour = spawnSync(join(build, 'test/burst_client'), ['a:1024', 'u:2048'], {
      env: env(second),
      encoding: 'utf8',
    });
    expect(neighbour.status).toBe(0);
  });
});
