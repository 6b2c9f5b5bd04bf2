/**
 * Writes a file so that a crash at any moment leaves either the old contents or the new, never a
 * torn file: a temp file beside it, fsync, rename. What the agent checkpoints goes through here,
 * and is read back validated.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { z } from 'zod';
import { fieldErrorsFromZod, ValidationError } from '../contract/index.js';

export function writeFileDurably(path: string, text: string, mode = 0o600): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, 'w', mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/**
 * Reads back a checkpoint's JSON: undefined when the file is absent (nothing checkpointed yet); a
 * file over `maxBytes` or not matching `schema` is an error naming it, never an empty state.
 */
export function readCheckpointFile<T>(
  path: string,
  schema: z.ZodType<T>,
  maxBytes = Number.POSITIVE_INFINITY,
): T | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (text.length > maxBytes) throw new ValidationError([], `checkpoint ${path} (over ${maxBytes} bytes)`);
  const parsed = schema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), `checkpoint ${path}`);
  return parsed.data;
}
