/**
 * Regions kept open between a periodic writer's passes (a card's sampler writes each of its
 * containers' regions ten times a second): opening a path costs several times the seqlocked
 * write itself, and grows with the number of containers. A handle is opened, and its magic
 * checked, once; each write then costs one fstat of the open file, which tells two things
 * without a path lookup: whether the file was unlinked (an Allocate or a handed-over PreStart
 * replaces the region at the same path, housekeeping removes the directory), and its size
 * (libvcuda grows the file as processes attach). An unlinked file's handle is closed and the path
 * opened again, so a write never lands in a deleted inode while a new region sits at the path.
 *
 * The owner (one sampler, one publisher) calls `closeUnused` after each pass, which closes the
 * handles no write asked for since the previous call (their containers are gone), and `closeAll`
 * when it stops.
 */
import { closeSync, fstatSync } from 'node:fs';
import { openRegion, type RegionAccess } from './region-seqlock.js';

export type RegionHandles = {
  /** Runs `write` on the region at `path` through its kept handle; same answer as `withRegion`. */
  withRegion: RegionAccess;
  /** Closes the handles of regions no write asked for since the previous call. */
  closeUnused(): void;
  closeAll(): void;
  /** How many regions are held open (tests, metrics). */
  openCount(): number;
};

type Handle = { fd: number; usedSincePass: boolean };

export function createRegionHandles(): RegionHandles {
  const held = new Map<string, Handle>();

  const close = (path: string, h: Handle) => {
    held.delete(path);
    closeSync(h.fd);
  };

  /** The held handle of `path` and its size, opening the path when none is held or it was unlinked. */
  function current(path: string): { h: Handle; size: number } | undefined {
    const kept = held.get(path);
    if (kept) {
      const st = fstatSync(kept.fd);
      if (st.nlink > 0) return { h: kept, size: st.size };
      // Unlinked: the region at `path`, if any, is another file now.
      close(path, kept);
    }
    const fd = openRegion(path);
    if (fd === undefined) return undefined;
    const h: Handle = { fd, usedSincePass: false };
    held.set(path, h);
    return { h, size: fstatSync(fd).size };
  }

  const withRegion: RegionAccess = (path, minSize, write) => {
    const found = current(path);
    if (!found) return false;
    found.h.usedSincePass = true;
    if (found.size < minSize) return false;
    try {
      write(found.h.fd);
    } catch (err) {
      // A short read or write (a truncated file): the next pass starts from a fresh open.
      close(path, found.h);
      throw err;
    }
    return true;
  };

  return {
    withRegion,
    closeUnused() {
      for (const [path, h] of held) {
        if (h.usedSincePass) h.usedSincePass = false;
        else close(path, h);
      }
    },
    closeAll() {
      for (const [path, h] of held) close(path, h);
    },
    openCount: () => held.size,
  };
}
