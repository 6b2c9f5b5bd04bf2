import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseProcCgroup } from '../../node-agent/card-sampling/cgroup-identity.js';
import { processAlive } from '../../test/support/process.js';
import { ContainerRuntime, stopContainer } from './container-runtime.js';

describe('simulated container runtime', () => {
  it('says in the container log why a command it cannot run idles', async () => {
    const logDir = mkdtempSync(join(tmpdir(), 'vcuda-runtime-'));
    const runtime = new ContainerRuntime({ baseEnv: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' }, logDir });
    const c = await runtime.start('pod-1', { name: 'app', command: ['python3', 'train.py'] }, []);
    await stopContainer(c, 1000);
    await runtime.close();
    expect(readFileSync(c.logPath, 'utf8')).toMatch(
      /^vcuda sim: "python3" is neither a simulated workload \(none built\) nor an allowed host command \(sleep, sh,/,
    );
  });

  it("forks containers in its runtime process, never in the kubelet's own", async () => {
    const logDir = mkdtempSync(join(tmpdir(), 'vcuda-runtime-'));
    const runtime = new ContainerRuntime({ baseEnv: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' }, logDir });
    try {
      const c = await runtime.start('pod-3', { name: 'app', command: ['sleep', '300'] }, []);
      // /proc/PID/stat: "pid (comm) state ppid ...".
      const ppid = Number(readFileSync(`/proc/${c.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      expect(ppid).not.toBe(process.pid);
      expect(processAlive(ppid)).toBe(true);
      await stopContainer(c, 1000);
      expect((await c.exited).signal).toBe('SIGTERM');
    } finally {
      await runtime.close();
    }
  });

  it("has the container's cgroup entry in place once its start resolves, and gone once its exit does", async () => {
    const logDir = mkdtempSync(join(tmpdir(), 'vcuda-runtime-'));
    const procDir = join(logDir, 'proc');
    const runtime = new ContainerRuntime({
      baseEnv: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
      logDir,
      procDir,
    });
    try {
      const uid = '0b5c9d4e-1f2a-4b3c-8d7e-6f5a4b3c2d1e';
      const c = await runtime.start(uid, { name: 'app', command: ['sleep', '300'] }, []);
      const entry = join(procDir, String(c.pid));
      expect(parseProcCgroup(readFileSync(join(entry, 'cgroup'), 'utf8'))).toEqual({
        podUid: uid,
        containerId: c.id,
      });
      expect(readlinkSync(join(entry, 'stat'))).toBe(`/proc/${c.pid}/stat`);
      expect(readFileSync(join(entry, 'status'), 'utf8')).toContain(`Pid:\t${c.pid}`);
      c.kill('SIGTERM');
      await c.exited;
      expect(existsSync(entry)).toBe(false);
      // A runtime that goes away with containers still running leaves none of their entries.
      const left = await runtime.start(uid, { name: 'app', command: ['sleep', '300'] }, []);
      expect(existsSync(join(procDir, String(left.pid)))).toBe(true);
      await runtime.close();
      await left.exited;
      expect(existsSync(join(procDir, String(left.pid)))).toBe(false);
    } finally {
      await runtime.close();
    }
  });

  it('fails a container whose cgroup entry it cannot write, saying why in its log', async () => {
    const logDir = mkdtempSync(join(tmpdir(), 'vcuda-runtime-'));
    const procDir = join(logDir, 'not-a-dir');
    writeFileSync(procDir, '');
    const runtime = new ContainerRuntime({
      baseEnv: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
      logDir,
      procDir,
    });
    try {
      const c = await runtime.start('pod-6', { name: 'app', command: ['sleep', '300'] }, []);
      expect(c.pid).toBeUndefined();
      expect(await c.exited).toEqual({ exitCode: 127, signal: null });
      expect(readFileSync(c.logPath, 'utf8')).toMatch(/^vcuda sim runtime: ENOTDIR/);
    } finally {
      await runtime.close();
    }
  });

  it('kills its containers when the kubelet process is killed with SIGKILL', async () => {
    const logDir = mkdtempSync(join(tmpdir(), 'vcuda-runtime-'));
    // A stand-in kubelet process that starts one container and prints its pid.
    const script = `
      const { ContainerRuntime } = await import(${JSON.stringify(join(import.meta.dirname, 'container-runtime.ts'))});
      const runtime = new ContainerRuntime({ baseEnv: { PATH: process.env.PATH }, logDir: ${JSON.stringify(logDir)} });
      const c = await runtime.start('pod-2', { name: 'app', command: ['sleep', '300'] }, []);
      console.log(c.pid);
      setInterval(() => {}, 1000);`;
    const kubelet = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const pid = await new Promise<number>((resolve) => kubelet.stdout.once('data', (d) => resolve(Number(String(d)))));
    expect(processAlive(pid)).toBe(true);
    // setpriv arms the signal before it execs the command: wait for the command itself.
    const command = () => readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    for (const until = Date.now() + 10_000; command() !== 'sleep' && Date.now() < until; )
      await new Promise((r) => setTimeout(r, 20));
    expect(command()).toBe('sleep');
    kubelet.kill('SIGKILL');
    const deadline = Date.now() + 5000;
    while (processAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(processAlive(pid)).toBe(false);
  });
});
