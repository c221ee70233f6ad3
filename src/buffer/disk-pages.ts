import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { isDiskFull } from '../errors.js';
import type { Logger } from '../log.js';
import { bufferFileBytes } from './disk-usage.js';
import type { ReserveFile } from './reserve.js';
import type { BufferSpace } from './space.js';

/**
 * The buffer's file as room on its disk, for the disk guard (src/buffer/disk-guard.ts): the free
 * and total bytes of its file system, freed pages given back to it, and the one-time switch of an
 * old buffer to incremental auto-vacuum. The guard decides when; these do it.
 */

const MIB = 1024 * 1024;
/** Pages one `incremental_vacuum` step returns (256 KiB at 4 KiB pages): what the log must take at once. */
const VACUUM_STEP_PAGES = 64;
/** Most vacuum steps of one check (256 MiB at 4 KiB pages); the rest follows at the next. */
const VACUUM_MAX_STEPS = 1024;

/**
 * Returns freed pages to the file system and empties the write-ahead log, in steps of
 * {@link VACUUM_STEP_PAGES} pages with a checkpoint after each: a single `incremental_vacuum`
 * of every free page writes the pages it moves to the log in one transaction, and on a full
 * disk the log cannot take them; it then fails at every check and the pages never come back
 * (seen on the tmpfs test: 4,000 pruned scans held inside a file that filled the disk).
 * Never throws: a failure is logged and the next check tries again.
 */
export function returnPages(space: BufferSpace, reserve: ReserveFile, logger: Logger): void {
  try {
    space.checkpointTruncate();
    // Bounded: at most VACUUM_MAX_STEPS steps per call; what is left goes at the next check.
    for (let step = 0; step < VACUUM_MAX_STEPS && space.freePages() > 0; step++) {
      space.incrementalVacuum(VACUUM_STEP_PAGES);
      space.checkpointTruncate();
    }
  } catch (err) {
    // A reader of another process (replay) may hold the log, or the disk has no room even for
    // one step; the next check tries again. The log a failed step grew is cut back first.
    if (isDiskFull(err)) reserve.releaseLastResort();
    try {
      space.checkpointTruncate();
    } catch {
      // as above
    }
    logger.warn({ err }, 'returning freed buffer pages failed; will try again');
  }
}

/**
 * Free and total bytes of the file system of the buffer at `path`, from `statfs` (a test's, or
 * `statfs` of the buffer's folder); `undefined` for `:memory:`.
 */
export function fileSystemSpace(
  path: string,
  statfs: (() => { free: number; size: number }) | undefined,
): { free: number; size: number } | undefined {
  if (path === ':memory:') return undefined;
  if (statfs) return statfs();
  const fs = statfsSync(dirname(path));
  return { free: fs.bavail * fs.bsize, size: fs.blocks * fs.bsize };
}

/**
 * A buffer made before `auto_vacuum = INCREMENTAL` (new buffers get it at creation) keeps freed
 * pages inside its file. Switching needs one `VACUUM`, which rewrites the whole file and needs
 * about its size again in free space; so it runs only at start, only up to `maxVacuumBytes`
 * (default 256 MiB), only with room for it (`free()`, bytes, asked only when a switch is due),
 * and is logged with its duration. Returns why the switch did not happen, or `undefined`.
 */
export function switchToIncrementalVacuum(options: {
  path: string;
  space: BufferSpace;
  logger: Logger;
  maxVacuumBytes: number | undefined;
  reserveSize: number;
  free: () => number;
}): string | undefined {
  const { path, space, logger } = options;
  if (path === ':memory:') return undefined;
  if (space.incrementalAutoVacuum()) return undefined;
  const bytes = bufferFileBytes(path);
  const max = options.maxVacuumBytes ?? 256 * MIB;
  const free = options.free();
  if (bytes > max || free < 2 * bytes + options.reserveSize) {
    const pending = `the buffer (${bytes} bytes) was not switched to incremental auto-vacuum: ${bytes > max ? `larger than ${max} bytes` : `only ${free} bytes free`}; pruned pages are reused but not returned to the disk`;
    logger.warn({ bytes, free, max }, pending);
    return pending;
  }
  const t0 = Date.now();
  logger.info({ bytes }, 'switching the buffer to incremental auto-vacuum (one VACUUM)');
  try {
    space.switchToIncrementalVacuum();
    logger.info({ bytes, ms: Date.now() - t0 }, 'buffer switched to incremental auto-vacuum');
    return undefined;
  } catch (err) {
    const pending = `switching the buffer to incremental auto-vacuum failed: ${(err as Error).message}`;
    logger.warn({ err }, pending);
    return pending;
  }
}
