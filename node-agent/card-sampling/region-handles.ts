/**
 * Regions kept open between a periodic writer's passes (a card's sampler writes each of its
 * containers' regions ten times a second): opening a path costs several times the seqlocked
 * write itself, and grows with the number of containers. A handle is opened, and its magic
 * checked, once; each pass then costs one fstat of the open file, at its first access, which
 * tells two things without a path lookup: whether the file was unlinked (an Allocate or a
 * handed-over PreStart replaces the region at the same path, housekeeping removes the directory),
 * and its size (libvcuda grows the file as processes attach). An unlinked file's handle is closed
 * and the path opened again, so a pass never works on a deleted inode while a new region sits at
 * the path (save one replaced within the pass itself, which the next pass finds).
 *
 * The owner (one sampler, one publisher) calls `closeUnused` after each pass, which ends the pass:
 * it closes the handles no access asked for since the previous call (their containers are gone),
 * and the next access to each other handle checks it again. `closeAll` when it stops.
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

/** `size`: the file's size as this pass's first access found it (undefined: not checked this pass). */
type Handle = { fd: number; usedSincePass: boolean; size: number | undefined };

export function createRegionHandles(): RegionHandles {
  const held = new Map<string, Handle>();

  const close = (path: string, h: Handle) => {
    held.delete(path);
    closeSync(h.fd);
  };

  /** The held handle of `path`, checked this pass, opening the path when none is held or it was unlinked. */
  function current(path: string): Handle | undefined {
    const kept = held.get(path);
    if (kept?.size !== undefined) return kept;
    if (kept) {
      const st = fstatSync(kept.fd);
      if (st.nlink > 0) {
        kept.size = st.size;
        return kept;
      }
      // Unlinked: the region at `path`, if any, is another file now.
      close(path, kept);
    }
    const fd = openRegion(path);
    if (fd === undefined) return undefined;
    const h: Handle = { fd, usedSincePass: false, size: fstatSync(fd).size };
    held.set(path, h);
    return h;
  }

  const withRegion: RegionAccess = (path, minSize, write) => {
    const h = current(path);
    if (!h) return false;
    h.usedSincePass = true;
    if ((h.size as number) < minSize) return false;
    try {
      write(h.fd);
    } catch (err) {
      // A short read or write (a truncated file): the next pass starts from a fresh open.
      close(path, h);
      throw err;
    }
    return true;
  };

  return {
    withRegion,
    closeUnused() {
      for (const [path, h] of held) {
        if (!h.usedSincePass) close(path, h);
        h.usedSincePass = false;
        h.size = undefined;
      }
    },
    closeAll() {
      for (const [path, h] of held) close(path, h);
    },
    openCount: () => held.size,
  };
}
