import { existsSync, statfsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { bufferFileBytes } from './disk-usage.js';

/**
 * What the buffer's disk can hold, as a byte quota of scan JSON: the quota derived from the disk
 * when `buffer.maxBytes` is not set, and whether a configured one fits. Pure arithmetic over the
 * file system's numbers and the buffer's size on disk (disk-usage.ts), plus the two `statfs`
 * lookups of the start and of `config check`; the disk guard (disk-guard.ts) rechecks it while
 * running.
 */

/**
 * Bytes on disk per byte the quota counts (a scan's JSON): a scan's read row, scan row and
 * indexes take about 3.2 times its JSON (770 against 242 bytes, measured on the tmpfs test);
 * rounded up.
 */
export const DISK_BYTES_PER_QUOTA_BYTE = 3.5;

const MIB = 1024 * 1024;

/** Size of the reserve file when none is configured, in bytes. */
export const DEFAULT_RESERVE_BYTES = 4 * MIB;

/**
 * Bounds of the byte quota derived from the disk when `buffer.maxBytes` is not set. At most 16 GiB:
 * the JSON of the default `buffer.maxPendingScans` (20 M scans of about 250 to 800 bytes), so on a
 * large disk the scan quota is what binds, and a weekend's backlog (10 M scans, about 2.5 GiB of
 * JSON) is never refused by the byte quota of a disk that holds it; at least 1 MiB,
 * so that a disk already full of other programs' files still gives a quota (intake then pauses on
 * the quota or on SQLITE_FULL, whichever comes first) and never one of zero.
 */
export const DERIVED_QUOTA_MAX_BYTES = 16 * 1024 * MIB;
export const DERIVED_QUOTA_MIN_BYTES = MIB;

/**
 * Room kept for the write-ahead log when deriving the quota: SQLite checkpoints it at 1000 pages
 * (4 MiB at the 4 KiB page size) and only then cuts it back to 1 MiB (`journal_size_limit`), so it
 * can hold that much beside the database. Measured on the 24 MiB tmpfs: without it, a buffer at
 * its derived quota went 0.4 MB below the low-space mark.
 */
export const WAL_ALLOWANCE_BYTES = 4 * MIB;

/** The default low-space mark: 10 % of the file system, at least the reserve plus 8 MiB (the resume mark of back-pressure), at most 256 MiB. */
export function defaultLowFreeBytes(
  fsSize: number,
  reserveBytes: number = DEFAULT_RESERVE_BYTES,
): number {
  return Math.min(256 * MIB, Math.max(reserveBytes + 8 * MIB, Math.round(fsSize * 0.1)));
}

/**
 * Bytes of scan JSON the buffer's disk can hold: the room the buffer may take (its own files, the
 * free bytes, the reserve file as far as it is written) less the whole reserve, the low-space
 * mark and {@link WAL_ALLOWANCE_BYTES}, divided by {@link DISK_BYTES_PER_QUOTA_BYTE}. The buffer's
 * own bytes count because the audit in them yields under pressure.
 */
export function diskHoldsBytes(d: {
  freeBytes: number;
  bufferBytes: number;
  reserveOnDisk: number;
  reserveBytes: number;
  lowFreeBytes: number;
}): number {
  return Math.max(
    0,
    Math.floor(
      (d.freeBytes +
        d.bufferBytes +
        d.reserveOnDisk -
        d.reserveBytes -
        d.lowFreeBytes -
        WAL_ALLOWANCE_BYTES) /
        DISK_BYTES_PER_QUOTA_BYTE,
    ),
  );
}

/** How often (ms) a quota derived from the disk is computed again: a statfs and a stat of the buffer's files. */
export const DERIVED_QUOTA_RECHECK_MS = 1000;

/**
 * The byte quota when `buffer.maxBytes` is not set: what the disk holds now,
 * within {@link DERIVED_QUOTA_MIN_BYTES}..{@link DERIVED_QUOTA_MAX_BYTES}; and its ceiling, what the
 * whole file system would hold if nothing else were on it. The quota is reached before the disk
 * is; a single submit is refused for ever (`SCANGW_E_BUFFER_TOO_LARGE`) only above the ceiling,
 * not because other files take room today.
 */
export function derivedQuota(
  fs: { free: number; size: number },
  bufferBytes: number,
  reserveOnDisk: number,
  reserveBytes: number,
  lowFreeBytes: number,
): { bytes: number; ceilingBytes: number; holdsBytes: number } {
  const clamp = (n: number) =>
    Math.min(DERIVED_QUOTA_MAX_BYTES, Math.max(DERIVED_QUOTA_MIN_BYTES, n));
  const holdsBytes = diskHoldsBytes({
    freeBytes: fs.free,
    bufferBytes,
    reserveOnDisk,
    reserveBytes,
    lowFreeBytes,
  });
  const whole = diskHoldsBytes({
    freeBytes: fs.size,
    bufferBytes: 0,
    reserveOnDisk: 0,
    reserveBytes,
    lowFreeBytes,
  });
  const bytes = clamp(holdsBytes);
  return { bytes, ceilingBytes: Math.max(bytes, clamp(whole)), holdsBytes };
}

/** The nearest existing folder of `path` (the buffer's folder may not exist before the first start). */
function existingFolder(path: string): string {
  let dir = dirname(path);
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

/**
 * The byte quota for a buffer at `bufferPath` when `buffer.maxBytes` is not set, from its file
 * system now (see {@link derivedQuota}); the gateway uses it from start until the disk guard's
 * first check. `:memory:`: {@link DERIVED_QUOTA_MAX_BYTES}.
 * @throws when no folder of the path can be examined (`statfs`).
 */
export function derivedQuotaForPath(
  bufferPath: string,
  reserveBytes: number = DEFAULT_RESERVE_BYTES,
): { bytes: number; ceilingBytes: number; holdsBytes: number } {
  if (bufferPath === ':memory:')
    return {
      bytes: DERIVED_QUOTA_MAX_BYTES,
      ceilingBytes: DERIVED_QUOTA_MAX_BYTES,
      holdsBytes: DERIVED_QUOTA_MAX_BYTES,
    };
  const s = statfsSync(existingFolder(bufferPath));
  const size = s.blocks * s.bsize;
  let reserveOnDisk = 0;
  try {
    reserveOnDisk = statSync(`${bufferPath}.reserve`).size;
  } catch {
    // not written yet
  }
  return derivedQuota(
    { free: s.bavail * s.bsize, size },
    bufferFileBytes(bufferPath),
    reserveOnDisk,
    reserveBytes,
    defaultLowFreeBytes(size, reserveBytes),
  );
}

/** The sentence for a byte quota larger than what the disk holds (`holds`: bytes of scan JSON). */
export function quotaTooLargeText(quota: number, holds: number): string {
  return `buffer.maxBytes (${quota} bytes of scans) is larger than the disk can hold (about ${holds} bytes of scans at ${DISK_BYTES_PER_QUOTA_BYTE} bytes on disk each): the disk fills before the quota is reached; lower buffer.maxBytes (or leave it out: the quota is then derived from the disk) or give the buffer more room`;
}

/**
 * For `config check` (the gateway not running): whether `quotaBytes` fits the file system that
 * holds (or will hold) `bufferPath`, by its size, less the default reserve and low-space mark.
 * Answers the sentence when it does not, `undefined` when it fits or the path is `:memory:`.
 * @throws when no folder of the path can be examined (`statfs`).
 */
export function quotaTooLargeForDisk(bufferPath: string, quotaBytes: number): string | undefined {
  if (bufferPath === ':memory:') return undefined;
  const fs = statfsSync(existingFolder(bufferPath));
  const size = fs.blocks * fs.bsize;
  const holds = diskHoldsBytes({
    freeBytes: size,
    bufferBytes: 0,
    reserveOnDisk: 0,
    reserveBytes: DEFAULT_RESERVE_BYTES,
    lowFreeBytes: defaultLowFreeBytes(size),
  });
  return quotaBytes > holds ? quotaTooLargeText(quotaBytes, holds) : undefined;
}
