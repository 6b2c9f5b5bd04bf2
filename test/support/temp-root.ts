/**
 * vitest's global setup: every temporary directory a test run creates goes under one directory of
 * its own (TMPDIR, which os.tmpdir() and the processes tests start both read), removed when the
 * run ends, so a test that fails before its own cleanup, or forgets it, leaves nothing behind.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  // Short: unix socket paths (device plugins, gRPC) under it are limited to 107 bytes.
  const root = mkdtempSync(join(tmpdir(), 'vcuda-t-'));
  process.env['TMPDIR'] = root;
  return () => rmSync(root, { recursive: true, force: true });
}
