/** Checkpoint files: written whole or not at all, read back validated (absent is empty, corrupt is an error). */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ValidationError } from '../contract/index.js';
import { readCheckpointFile, writeFileDurably } from './durable-file.js';

const tmp = mkdtempSync(join(tmpdir(), 'vcuda-durable-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const schema = z.object({ version: z.literal(1), names: z.array(z.string()) });

describe('checkpoint files', () => {
  it('reads back what was written, in a folder it creates', () => {
    const path = join(tmp, 'a/b/cp.json');
    writeFileDurably(path, JSON.stringify({ version: 1, names: ['x'] }));
    expect(readCheckpointFile(path, schema)).toEqual({ version: 1, names: ['x'] });
    expect(readFileSync(path, 'utf8')).toBe('{"version":1,"names":["x"]}');
  });

  it('an absent file is nothing checkpointed yet', () => {
    expect(readCheckpointFile(join(tmp, 'absent.json'), schema)).toBeUndefined();
  });

  it('a file not matching the schema is an error naming the field, never an empty state', () => {
    const path = join(tmp, 'corrupt.json');
    writeFileSync(path, JSON.stringify({ version: 1, names: [3] }));
    expect(() => readCheckpointFile(path, schema)).toThrow(ValidationError);
    expect(() => readCheckpointFile(path, schema)).toThrow(/names\[0\]: Invalid input: expected string/);
  });

  it('a file over the size limit is refused, naming the limit', () => {
    const path = join(tmp, 'large.json');
    writeFileDurably(path, JSON.stringify({ version: 1, names: ['0123456789'] }));
    expect(() => readCheckpointFile(path, schema, 16)).toThrow(`checkpoint ${path} (over 16 bytes)`);
  });
});
