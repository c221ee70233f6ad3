import { closeSync, existsSync, fsyncSync, openSync, statfsSync, statSync, truncateSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '../log.js';
import { connectionOf } from './connection.js';
import type { Retention } from './retention.js';
import type { BufferStore } from './store.js';
import { isDiskFull } from '../errors.js';
import { RESUME_FREE_BYTES } from './back-pressure.js';
import type { Clock } from '../clock.js';

/** What the health page shows of the disk guard. */
export interface DiskGuardStatus {
  /** Bytes of the reserve file currently held (while released: its last part, kept for the log's checkpoint, then 0). */
  reserveBytes: number;
  /** The reserve is released (the disk was full); it is written again once there is room. */
  reserveReleased: boolean;
  /** Free bytes on the buffer's file system at the last check (`undefined` for `:memory:`). */
  freeBytes?: number;
  /** Below this many free bytes the audit yields: delivered scans are pruned before their audit period ends. */
  lowFreeBytes: number;
  /** Delivered scans pruned before their audit period ended, since start. */
  prunedEarlyScans: number;
  /** The last early prune: when and how many delivered scans it removed. */
  lastEarlyPrune?: { at: string; scans: number; reads: number; batches: number };
  /** The database is not yet in `auto_vacuum = INCREMENTAL` (switch skipped at start): freed pages are reused but not returned. */
  vacuumPending?: string;
  /** The byte quota (`buffer.maxBytes`) is larger than the disk can hold: the disk fills before the quota is reached. */
  quotaTooLarge?: string;
  /** `buffer.maxBytes` is not set: the byte quota in force is derived from the disk (bytes of scan JSON), rechecked every second. */
  derivedQuotaBytes?: number;
}

export interface DiskGuardOptions {
  store: BufferStore;
  retention: Retention;
  logger: Logger;
  /** Size of the reserve file beside the buffer, in bytes. Default 4 MiB. 0: no reserve. */
  reserveBytes?: number;
  /**
   * Free bytes below which delivered scans are pruned early. Default: 10 % of the file system,
   * at least the reserve plus 8 MiB (the resume mark of back-pressure), at most 256 MiB.
   */
  lowFreeBytes?: number;
  /** How often free space is checked, in ms (one `statfs`). Default 250: intake at full speed fills megabytes a second. */
  intervalMs?: number;
  /** Delivered scans one early-prune step removes before space is measured again. Default 2000. */
  step?: number;
  /** Largest buffer file switched to `auto_vacuum = INCREMENTAL` by a `VACUUM` at start. Default 256 MiB. */
  maxVacuumBytes?: number;
  now?: Clock;
  /** Free and total bytes of the buffer's file system; default `statfs` of the buffer's folder. */
  statfs?: () => { free: number; size: number };
  /** The configured byte quota (`buffer.maxBytes`), checked against what the disk can hold. */
  quotaBytes?: number;
  /**
   * `buffer.maxBytes` is not set (`quotaBytes` undefined): called at start and at each recheck
   * (every second) with the byte quota derived from the disk and its ceiling (see {@link derivedQuota}).
   */
  onDerivedQuota?: (bytes: number, ceilingBytes: number) => void;
}

/**
 * Bytes on disk per byte the quota counts (a scan's JSON): a scan's read row, scan row and
 * indexes take about 3.2 times its JSON (770 against 242 bytes, measured on the tmpfs test);
 * rounded up.
 */
export const DISK_BYTES_PER_QUOTA_BYTE = 3.5;

const MIB = 1024 * 1024;
const CHUNK = 64 * 1024;
/** Pages one `incremental_vacuum` step returns (256 KiB at 4 KiB pages): what the log must take at once. */
const VACUUM_STEP_PAGES = 64;
/** Most vacuum steps of one check (256 MiB at 4 KiB pages); the rest follows at the next. */
const VACUUM_MAX_STEPS = 1024;

/** Size of the reserve file when none is configured, in bytes. */
export const DEFAULT_RESERVE_BYTES = 4 * MIB;

/**
 * Bounds of the byte quota derived from the disk when `buffer.maxBytes` is not set. At most 2 GiB
 * (the former fixed default: `buffer.maxPendingScans` bounds a bigger disk anyway); at least 1 MiB,
 * so that a disk already full of other programs' files still gives a quota (intake then pauses on
 * the quota or on SQLITE_FULL, whichever comes first) and never one of zero.
 */
export const DERIVED_QUOTA_MAX_BYTES = 2 * 1024 * MIB;
export const DERIVED_QUOTA_MIN_BYTES = MIB;

/**
 * Room kept for the write-ahead log when deriving the quota: SQLite checkpoints it at 1000 pages
 * (4 MiB at the 4 KiB page size) and only then cuts it back to 1 MiB (`journal_size_limit`), so it
 * can hold that much beside the database. Measured on the 24 MiB tmpfs: without it, a buffer at
 * its derived quota went 0.4 MB below the low-space mark.
 */
export const WAL_ALLOWANCE_BYTES = 4 * MIB;

/** The default low-space mark: 10 % of the file system, at least the reserve plus 8 MiB (the resume mark of back-pressure), at most 256 MiB. */
export function defaultLowFreeBytes(fsSize: number, reserveBytes: number = DEFAULT_RESERVE_BYTES): number {
  return Math.min(256 * MIB, Math.max(reserveBytes + 8 * MIB, Math.round(fsSize * 0.1)));
}

/**
 * Bytes of scan JSON the buffer's disk can hold: the room the buffer may take (its own files, the
 * free bytes, the reserve file as far as it is written) less the whole reserve, the low-space
 * mark and {@link WAL_ALLOWANCE_BYTES}, divided by {@link DISK_BYTES_PER_QUOTA_BYTE}. The buffer's
 * own bytes count because the audit in them yields under pressure.
 */
export function diskHoldsBytes(d: { freeBytes: number; bufferBytes: number; reserveOnDisk: number; reserveBytes: number; lowFreeBytes: number }): number {
  return Math.max(0, Math.floor((d.freeBytes + d.bufferBytes + d.reserveOnDisk - d.reserveBytes - d.lowFreeBytes - WAL_ALLOWANCE_BYTES) / DISK_BYTES_PER_QUOTA_BYTE));
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
export function derivedQuota(fs: { free: number; size: number }, bufferBytes: number, reserveOnDisk: number, reserveBytes: number, lowFreeBytes: number): { bytes: number; ceilingBytes: number; holdsBytes: number } {
  const clamp = (n: number) => Math.min(DERIVED_QUOTA_MAX_BYTES, Math.max(DERIVED_QUOTA_MIN_BYTES, n));
  const holdsBytes = diskHoldsBytes({ freeBytes: fs.free, bufferBytes, reserveOnDisk, reserveBytes, lowFreeBytes });
  const whole = diskHoldsBytes({ freeBytes: fs.size, bufferBytes: 0, reserveOnDisk: 0, reserveBytes, lowFreeBytes });
  const bytes = clamp(holdsBytes);
  return { bytes, ceilingBytes: Math.max(bytes, clamp(whole)), holdsBytes };
}

/** Bytes of the buffer's files (database and write-ahead log), 0 for those missing. */
function bufferFileBytes(path: string): number {
  let own = 0;
  for (const suffix of ['', '-wal']) {
    try {
      own += statSync(path + suffix).size;
    } catch {
      // not there (yet)
    }
  }
  return own;
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
export function derivedQuotaForPath(bufferPath: string, reserveBytes: number = DEFAULT_RESERVE_BYTES): { bytes: number; ceilingBytes: number; holdsBytes: number } {
  if (bufferPath === ':memory:') return { bytes: DERIVED_QUOTA_MAX_BYTES, ceilingBytes: DERIVED_QUOTA_MAX_BYTES, holdsBytes: DERIVED_QUOTA_MAX_BYTES };
  const s = statfsSync(existingFolder(bufferPath));
  const size = s.blocks * s.bsize;
  let reserveOnDisk = 0;
  try {
    reserveOnDisk = statSync(`${bufferPath}.reserve`).size;
  } catch {
    // not written yet
  }
  return derivedQuota({ free: s.bavail * s.bsize, size }, bufferFileBytes(bufferPath), reserveOnDisk, reserveBytes, defaultLowFreeBytes(size, reserveBytes));
}

/** The sentence for a byte quota larger than what the disk holds (`holds`: bytes of scan JSON). */
function quotaTooLargeText(quota: number, holds: number): string {
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
  const holds = diskHoldsBytes({ freeBytes: size, bufferBytes: 0, reserveOnDisk: 0, reserveBytes: DEFAULT_RESERVE_BYTES, lowFreeBytes: defaultLowFreeBytes(size) });
  return quotaBytes > holds ? quotaTooLargeText(quotaBytes, holds) : undefined;
}

/**
 * Keeps delivery and intake going on a disk that fills.
 *
 * - **Reserve.** A file `<buffer>.reserve` of real (not sparse) bytes that the gateway owns. When
 *   SQLite reports the disk full, it is cut to its last part and the write-ahead log checkpointed,
 *   so that the deletes of early pruning and delivery's batch updates find room in the log; the
 *   last part goes when a checkpoint fails with SQLITE_FULL after that. It is written again once
 *   the file system has room for it and the resume mark besides.
 * - **The audit yields.** Delivered scans are kept `retentionDays` for audit; under disk pressure
 *   (free bytes below `lowFreeBytes`, SQLITE_FULL, or `max_page_count` nearly reached) the oldest
 *   delivered batches go first, step by step, until the pressure is gone. Undelivered scans are
 *   never pruned (see {@link Retention.pruneOldestDelivered}).
 * - **Pages back.** After each step `PRAGMA incremental_vacuum` returns the freed pages and a
 *   `wal_checkpoint(TRUNCATE)` empties the write-ahead log, so the file system sees the room.
 */
export class DiskGuard {
  private timer: NodeJS.Timeout | undefined;
  private readonly now: Clock;
  private readonly reservePath: string;
  private readonly reserveSize: number;
  private reserveHeld = 0;
  private released = false;
  private fullReported = false;
  private running: Promise<void> | undefined;
  private lowFree: number;
  private lastFree: number | undefined;
  private pruned = 0;
  private lastEarly: DiskGuardStatus['lastEarlyPrune'];
  private vacuumPending: string | undefined;
  private quotaTooLarge: string | undefined;
  private quotaCheckedAt = -Infinity;
  private derived: number | undefined;
  private derivedLogged: number | undefined;
  /** Logged once per episode of pressure with nothing delivered left, not every 250 ms. */
  private nothingLeftWarned = false;
  private lastFailure: string | undefined;

  constructor(private readonly options: DiskGuardOptions) {
    this.now = options.now ?? Date.now;
    this.reservePath = `${options.store.path}.reserve`;
    this.reserveSize = options.store.path === ':memory:' ? 0 : (options.reserveBytes ?? DEFAULT_RESERVE_BYTES);
    const size = this.stat()?.size ?? 0;
    this.lowFree = options.lowFreeBytes ?? defaultLowFreeBytes(size, this.reserveSize);
  }

  /** Switches the buffer to incremental auto-vacuum if needed, writes the reserve, and checks every `intervalMs`. */
  start(): void {
    this.switchToIncrementalVacuum();
    this.writeReserve();
    this.checkQuotaFits();
    // The status says the free space from the start, not only after the first check (250 ms on):
    // a buffer can reach its quota before that (seen in the tmpfs test of the derived quota).
    this.stat();
    this.timer = setInterval(() => void this.check(), this.options.intervalMs ?? 250);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** SQLite reported the disk full (a commit or a delivery step): release the reserve and prune now. */
  reportFull(): void {
    this.fullReported = true;
    this.releaseReserve();
    void this.check();
  }

  /** One check (joins the one in progress): prunes under pressure, re-writes the reserve when there is room. */
  check(): Promise<void> {
    this.running ??= this.checkOnce()
      .catch((err: unknown) => {
        // Once per distinct failure: on a full disk it repeats every check.
        const message = (err as Error).message;
        if (message !== this.lastFailure) this.options.logger[isDiskFull(err) ? 'warn' : 'error']({ err }, 'disk guard check failed; will try again');
        this.lastFailure = message;
      })
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  /** The reserve is written (or there is none): false from its release on a full disk until it is written again. */
  reserveReady(): boolean {
    return !this.released;
  }

  snapshot(): DiskGuardStatus {
    return {
      reserveBytes: this.reserveHeld,
      reserveReleased: this.released,
      ...(this.lastFree !== undefined ? { freeBytes: this.lastFree } : {}),
      lowFreeBytes: this.lowFree,
      prunedEarlyScans: this.pruned,
      ...(this.lastEarly ? { lastEarlyPrune: { ...this.lastEarly } } : {}),
      ...(this.vacuumPending ? { vacuumPending: this.vacuumPending } : {}),
      ...(this.quotaTooLarge ? { quotaTooLarge: this.quotaTooLarge } : {}),
      ...(this.derived !== undefined ? { derivedQuotaBytes: this.derived } : {}),
    };
  }

  /**
   * Whether the configured byte quota fits the disk, or (not configured) the quota derived from it:
   * the buffer's files and the free space, less the reserve, the low-space mark and the log's room, against the
   * quota times {@link DISK_BYTES_PER_QUOTA_BYTE} (see {@link derivedQuota}). Rechecked every
   * second when derived, every minute when configured (another program's files change what is
   * left); logged when it changes.
   */
  private checkQuotaFits(): void {
    const quota = this.options.quotaBytes;
    if (quota === undefined && !this.options.onDerivedQuota) return;
    // A derived quota follows the disk within a second: files landing in an inbox on the same file
    // system take room the quota was counting on. A configured one is only compared, each minute.
    if (this.now() - this.quotaCheckedAt < (quota === undefined ? DERIVED_QUOTA_RECHECK_MS : 60_000)) return;
    this.quotaCheckedAt = this.now();
    const s = this.stat();
    if (!s) return;
    const d = derivedQuota(s, bufferFileBytes(this.options.store.path), this.reserveHeld, this.reserveSize, this.lowFree);
    if (quota === undefined) {
      const previous = this.derivedLogged;
      this.derived = d.bytes;
      // Logged at start and when it moved by a tenth since, not at every check.
      if (previous === undefined || Math.abs(d.bytes - previous) > previous * 0.1) {
        this.derivedLogged = d.bytes;
        this.options.logger.info(
          { quotaBytes: d.bytes, diskHoldsBytes: d.holdsBytes, ceilingBytes: d.ceilingBytes, freeBytes: s.free, lowFreeBytes: this.lowFree },
          previous === undefined ? 'buffer.maxBytes not set: the byte quota is derived from the disk, so that it is reached before the disk is full' : 'byte quota derived from the disk changed',
        );
      }
      this.options.onDerivedQuota?.(d.bytes, d.ceilingBytes);
      return;
    }
    const next = quota > d.holdsBytes ? quotaTooLargeText(quota, d.holdsBytes) : undefined;
    if (next !== undefined && this.quotaTooLarge === undefined) this.options.logger.warn({ quotaBytes: quota, diskHoldsBytes: d.holdsBytes }, next);
    this.quotaTooLarge = next;
  }

  private async checkOnce(): Promise<void> {
    this.checkQuotaFits();
    const { retention, logger } = this.options;
    const step = this.options.step ?? 2000;
    const total = { scans: 0, reads: 0, batches: 0 };
    // Bounded: each step removes `step` scans or ends the loop (nothing delivered left).
    let pressured = false;
    while (this.underPressure()) {
      pressured = true;
      // Only on SQLITE_FULL, when intake is already paused: released on mere low space, the reserve
      // would be filled by intake, and delivery would find no room when the disk is full.
      const full = this.fullReported;
      if (full) {
        this.releaseReserve();
        // The log first: what delivery and intake wrote before the disk filled may hold the room.
        this.returnPages();
      }
      let r;
      try {
        // Smaller steps on a full disk: each one's deletes must fit in what the log can still take.
        r = await retention.pruneOldestDelivered(full ? Math.min(step, 500) : step);
      } finally {
        this.returnPages();
      }
      total.scans += r.scans;
      total.reads += r.reads;
      total.batches += r.batches;
      this.fullReported = false;
      this.lastFailure = undefined;
      if (r.scans === 0) {
        if (total.scans === 0 && !this.nothingLeftWarned) {
          logger.warn({ freeBytes: this.lastFree, lowFreeBytes: this.lowFree }, 'buffer disk is low and no delivered scans are left to prune: only undelivered data remains');
        }
        this.nothingLeftWarned = true;
        break;
      }
      this.nothingLeftWarned = false;
    }
    if (!pressured) this.nothingLeftWarned = false;
    if (total.scans > 0) {
      this.pruned += total.scans;
      this.lastEarly = { at: new Date(this.now()).toISOString(), ...total };
      logger.warn(
        { ...total, freeBytes: this.lastFree, lowFreeBytes: this.lowFree, prunedEarlyScans: this.pruned },
        'buffer disk is low: pruned the oldest delivered scans before their audit period ended (undelivered scans are kept)',
      );
    }
    if (this.released && this.reserveSize > 0) {
      // Room for the reserve and back-pressure's resume mark besides, not the low-space mark: intake
      // resumes only once the reserve is back, and between the two marks nothing would be pruned
      // to make room for it (nothing is under pressure there), so intake would wait for ever.
      const free = this.stat()?.free ?? 0;
      if (free >= this.reserveSize + RESUME_FREE_BYTES) this.writeReserve();
    }
  }

  /** Free space below the mark, SQLITE_FULL reported, or (tests, embedded limits) `max_page_count` nearly reached. */
  private underPressure(): boolean {
    if (this.fullReported) return true;
    const s = this.stat();
    if (s && s.free < this.lowFree) return true;
    const db = connectionOf(this.options.store);
    const max = db.pragma('max_page_count', { simple: true }) as number;
    if (max < 1_000_000_000) {
      const used = (db.pragma('page_count', { simple: true }) as number) - (db.pragma('freelist_count', { simple: true }) as number);
      return used > max * 0.9;
    }
    return false;
  }

  /**
   * Returns freed pages to the file system and empties the write-ahead log, in steps of
   * {@link VACUUM_STEP_PAGES} pages with a checkpoint after each: a single `incremental_vacuum`
   * of every free page writes the pages it moves to the log in one transaction, and on a full
   * disk the log cannot take them; it then fails at every check and the pages never come back
   * (seen on the tmpfs test: 4,000 pruned scans held inside a file that filled the disk).
   */
  private returnPages(): void {
    const db = connectionOf(this.options.store);
    try {
      db.pragma('wal_checkpoint(TRUNCATE)');
      // Bounded: at most VACUUM_MAX_STEPS steps per call; what is left goes at the next check.
      for (let step = 0; step < VACUUM_MAX_STEPS && (db.pragma('freelist_count', { simple: true }) as number) > 0; step++) {
        db.pragma(`incremental_vacuum(${VACUUM_STEP_PAGES})`);
        db.pragma('wal_checkpoint(TRUNCATE)');
      }
    } catch (err) {
      // A reader of another process (replay) may hold the log, or the disk has no room even for
      // one step; the next check tries again. The log a failed step grew is cut back first.
      if (isDiskFull(err)) this.releaseLastResort();
      try {
        db.pragma('wal_checkpoint(TRUNCATE)');
      } catch {
        // as above
      }
      this.options.logger.warn({ err }, 'returning freed buffer pages failed; will try again');
    }
  }

  /** Free and total bytes of the buffer's file system; the free bytes are kept for the status. */
  private stat(): { free: number; size: number } | undefined {
    if (this.options.store.path === ':memory:') return undefined;
    let s: { free: number; size: number };
    if (this.options.statfs) s = this.options.statfs();
    else {
      const fs = statfsSync(dirname(this.options.store.path));
      s = { free: fs.bavail * fs.bsize, size: fs.blocks * fs.bsize };
    }
    this.lastFree = s.free;
    return s;
  }

  /**
   * Releases the reserve but its last part ({@link lastResortBytes}): that is kept for the
   * write-ahead log's checkpoint, see {@link releaseLastResort}.
   */
  private releaseReserve(): void {
    if (this.released || this.reserveSize === 0) return;
    const keep = this.lastResortBytes();
    try {
      truncateSync(this.reservePath, keep);
      this.reserveHeld = keep;
    } catch {
      // Already gone (removed by hand): nothing to release.
      this.reserveHeld = 0;
    }
    this.released = true;
    // The log first, before any prune, vacuum step or status write appends to it: the reserve's
    // room is what its checkpoint needs to copy pages beyond the end of the database file.
    try {
      connectionOf(this.options.store).pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // Still no room (or a reader holds the log): returnPages tries again at the check that follows.
    }
    this.options.logger.warn({ path: this.reservePath }, 'buffer disk full: released the reserve so that delivery and pruning can write');
  }

  /**
   * The reserve's last part, kept when the rest is released: a sixteenth, at most 256 KiB. Small,
   * as the rest must take one intake commit's new pages (about 3.7 MB measured, 1,000 scans of
   * 600-character references); enough for the few new pages a prune or a delivery step adds.
   */
  private lastResortBytes(): number {
    return Math.min(256 * 1024, Math.floor(this.reserveSize / 16));
  }

  /**
   * A checkpoint failed with SQLITE_FULL after the reserve was released: what was written since
   * (a delivery step's updates can fill the disk to its last byte) left no room for the log's
   * few pages beyond the end of the database file, and without the checkpoint the log is never
   * emptied. Its last part is deleted and the log checkpointed at once, before anything else
   * writes (seen before on the MQTT tmpfs test: stuck for good for want of two pages).
   */
  private releaseLastResort(): void {
    if (!this.released || this.reserveHeld === 0) return;
    try {
      unlinkSync(this.reservePath);
    } catch {
      // Already gone.
    }
    this.reserveHeld = 0;
    try {
      connectionOf(this.options.store).pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // The caller logs the failure; the next check tries again.
    }
    this.options.logger.warn({ path: this.reservePath }, 'buffer disk full: released the last of the reserve for the write-ahead log checkpoint');
  }

  /** Writes the reserve with real bytes (a sparse file would free nothing when deleted). */
  private writeReserve(): void {
    if (this.reserveSize === 0) return;
    let fd: number | undefined;
    try {
      let have = 0;
      try {
        have = statSync(this.reservePath).size;
      } catch {
        have = 0;
      }
      if (have < this.reserveSize) {
        fd = openSync(this.reservePath, 'a', 0o600);
        const zeros = Buffer.alloc(CHUNK, 0xa5);
        for (let n = have; n < this.reserveSize; n += CHUNK) writeSync(fd, zeros, 0, Math.min(CHUNK, this.reserveSize - n));
        fsyncSync(fd);
      }
      const wasReleased = this.released;
      this.reserveHeld = this.reserveSize;
      this.released = false;
      if (wasReleased) this.options.logger.info({ path: this.reservePath, bytes: this.reserveSize }, 'buffer disk has room again: reserve written again');
    } catch (err) {
      // No room for it (yet): held as released, written again at a later check.
      try {
        unlinkSync(this.reservePath);
      } catch {
        // nothing written
      }
      this.released = true;
      this.reserveHeld = 0;
      this.options.logger.warn({ err, path: this.reservePath }, 'cannot write the buffer reserve; will try again when there is room');
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }

  /**
   * A buffer made before `auto_vacuum = INCREMENTAL` (new buffers get it at creation) keeps freed
   * pages inside its file. Switching needs one `VACUUM`, which rewrites the whole file and needs
   * about its size again in free space; so it runs only at start, only up to `maxVacuumBytes`,
   * only with room for it, and is logged with its duration.
   */
  private switchToIncrementalVacuum(): void {
    const { store, logger } = this.options;
    if (store.path === ':memory:') return;
    const db = connectionOf(store);
    if ((db.pragma('auto_vacuum', { simple: true }) as number) === 2) return;
    const bytes = bufferFileBytes(store.path);
    const max = this.options.maxVacuumBytes ?? 256 * MIB;
    const free = this.stat()?.free ?? 0;
    if (bytes > max || free < 2 * bytes + this.reserveSize) {
      this.vacuumPending = `the buffer (${bytes} bytes) was not switched to incremental auto-vacuum: ${bytes > max ? `larger than ${max} bytes` : `only ${free} bytes free`}; pruned pages are reused but not returned to the disk`;
      logger.warn({ bytes, free, max }, this.vacuumPending);
      return;
    }
    const t0 = Date.now();
    logger.info({ bytes }, 'switching the buffer to incremental auto-vacuum (one VACUUM)');
    try {
      db.pragma('auto_vacuum = INCREMENTAL');
      db.exec('VACUUM');
      db.pragma('wal_checkpoint(TRUNCATE)');
      logger.info({ bytes, ms: Date.now() - t0 }, 'buffer switched to incremental auto-vacuum');
    } catch (err) {
      this.vacuumPending = `switching the buffer to incremental auto-vacuum failed: ${(err as Error).message}`;
      logger.warn({ err }, this.vacuumPending);
    }
  }
}
