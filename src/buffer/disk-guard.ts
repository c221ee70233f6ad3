import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '../log.js';
import { bufferFileBytes } from './disk-usage.js';
import {
  DEFAULT_RESERVE_BYTES,
  DERIVED_QUOTA_RECHECK_MS,
  defaultLowFreeBytes,
  derivedQuota,
  quotaTooLargeText,
} from './disk-quota.js';
import { ReserveFile } from './reserve.js';
import { planEarlyPrune } from './early-prune-plan.js';
import type { EarlyPruneRecord } from './pruning.js';
import type { Retention } from './retention.js';
import type { BufferStore } from './store.js';
import { isDiskFull } from '../errors.js';
import { RESUME_FREE_BYTES } from './back-pressure.js';
import {
  RUNWAY_SAMPLE_MS,
  RUNWAY_WINDOW_MS,
  estimateRunway,
  type Runway,
  type ScanIdSample,
} from './runway.js';
import type { Clock } from '../clock.js';

export {
  DEFAULT_RESERVE_BYTES,
  DERIVED_QUOTA_MAX_BYTES,
  DERIVED_QUOTA_MIN_BYTES,
  DERIVED_QUOTA_RECHECK_MS,
  DISK_BYTES_PER_QUOTA_BYTE,
  WAL_ALLOWANCE_BYTES,
  defaultLowFreeBytes,
  derivedQuota,
  derivedQuotaForPath,
  diskHoldsBytes,
  quotaTooLargeForDisk,
} from './disk-quota.js';

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
  /**
   * Audit lost before its period ended, as remembered in the buffer (also across restarts): the
   * early prunes of the last `buffer.retentionDays`, summed, with the span of the read times of
   * the scans they took and the latest prune's time and reason. Absent when there were none.
   */
  auditLost?: {
    scans: number;
    firstReadAt?: string;
    lastReadAt?: string;
    at: string;
    reason: string;
  };
  /** Free space is below the mark and pruning every delivered scan it may take would not restore it: nothing was pruned. */
  pruneCannotHelp?: string;
  /** Delivered scans read within this many hours are never pruned early (`buffer.earlyPruneKeepHours`). */
  keepRecentHours: number;
  /** The database is not yet in `auto_vacuum = INCREMENTAL` (switch skipped at start): freed pages are reused but not returned. */
  vacuumPending?: string;
  /** The byte quota (`buffer.maxBytes`) is larger than the disk can hold: the disk fills before the quota is reached. */
  quotaTooLarge?: string;
  /** `buffer.maxBytes` is not set: the byte quota in force is derived from the disk (bytes of scan JSON), rechecked every second. */
  derivedQuotaBytes?: number;
  /**
   * How long the free space above the low-space mark lasts at the last day's rate of scans if
   * none were delivered from now on (runway.ts): absent in the first 10 minutes, when no scan
   * was written in the window, and for a buffer in memory.
   */
  runway?: Runway;
}

export interface DiskGuardOptions {
  /** The buffer, open by {@link DiskGuard.start}: its file's pages and log through `store.space`, its size through disk-usage.ts. */
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
  /**
   * Delivered scans of batches finished within this many hours are never pruned early: the last
   * shift's audit (`trace` of an item read an hour ago) outlives a filling disk. Default 24.
   */
  keepRecentHours?: number;
  /** Delivered scans one early-prune step removes at most before space is measured again. Default 2000. */
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

const MIB = 1024 * 1024;
/** While pruning cannot help and no room came back, how often it is worked out again, in ms. */
const CANNOT_HELP_RECHECK_MS = 5000;
/** Pages one `incremental_vacuum` step returns (256 KiB at 4 KiB pages): what the log must take at once. */
const VACUUM_STEP_PAGES = 64;
/** Most vacuum steps of one check (256 MiB at 4 KiB pages); the rest follows at the next. */
const VACUUM_MAX_STEPS = 1024;

/**
 * Keeps delivery and intake going on a disk that fills.
 *
 * - **Reserve** (reserve.ts). A file `<buffer>.reserve` of real (not sparse) bytes that the gateway owns. When
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
  private readonly reserve: ReserveFile;
  private readonly reserveSize: number;
  private fullReported = false;
  private running: Promise<void> | undefined;
  /** The low-space mark; from the file system's size at the first need ({@link lowFreeMark}). */
  private lowFree: number | undefined;
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
  /** The early prunes remembered in the buffer (loaded at start, appended at each prune). */
  private earlyPrunes: EarlyPruneRecord[] = [];
  private cannotHelp: string | undefined;
  private cannotHelpAt = -Infinity;
  private cannotHelpFree = 0;
  /** The newest scan id once a minute over the last day, oldest first (runway.ts). */
  private idSamples: ScanIdSample[] = [];
  private runway: Runway | undefined;

  /** Only keeps its options: {@link start} examines the disk and writes the reserve. */
  constructor(private readonly options: DiskGuardOptions) {
    this.now = options.now ?? Date.now;
    this.reserveSize =
      options.store.path === ':memory:' ? 0 : (options.reserveBytes ?? DEFAULT_RESERVE_BYTES);
    this.reserve = new ReserveFile(
      `${options.store.path}.reserve`,
      this.reserveSize,
      options.logger,
      () => options.store.space.checkpointTruncate(),
    );
  }

  /**
   * The low-space mark: `lowFreeBytes`, or by default from the file system's size (one `statfs`,
   * at start or at the first check before it), kept from then on.
   */
  private lowFreeMark(): number {
    return (this.lowFree ??=
      this.options.lowFreeBytes ?? defaultLowFreeBytes(this.stat()?.size ?? 0, this.reserveSize));
  }

  /**
   * Examines the disk (its low-space mark), switches the buffer to incremental auto-vacuum if
   * needed, writes the reserve, and checks every `intervalMs`. The store must be open.
   */
  start(): void {
    this.lowFreeMark();
    this.earlyPrunes = this.options.store.pruning.earlyPrunes();
    this.switchToIncrementalVacuum();
    this.reserve.write();
    this.checkQuotaFits();
    // The status says the free space from the start, not only after the first check (250 ms on):
    // a buffer can reach its quota before that (seen in the tmpfs test of the derived quota).
    this.stat();
    this.sampleRunway();
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
    this.reserve.release();
    void this.check();
  }

  /** One check (joins the one in progress): prunes under pressure, re-writes the reserve when there is room. */
  check(): Promise<void> {
    this.running ??= this.checkOnce()
      .catch((err: unknown) => {
        // Once per distinct failure: on a full disk it repeats every check.
        const message = (err as Error).message;
        if (message !== this.lastFailure)
          this.options.logger[isDiskFull(err) ? 'warn' : 'error'](
            { err },
            'disk guard check failed; will try again',
          );
        this.lastFailure = message;
      })
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  /** The reserve is written (or there is none): false from its release on a full disk until it is written again. */
  reserveReady(): boolean {
    return !this.reserve.released;
  }

  snapshot(): DiskGuardStatus {
    return {
      reserveBytes: this.reserve.held,
      reserveReleased: this.reserve.released,
      ...(this.lastFree !== undefined ? { freeBytes: this.lastFree } : {}),
      lowFreeBytes: this.lowFreeMark(),
      prunedEarlyScans: this.pruned,
      ...(this.lastEarly ? { lastEarlyPrune: { ...this.lastEarly } } : {}),
      ...(this.vacuumPending ? { vacuumPending: this.vacuumPending } : {}),
      ...(this.quotaTooLarge ? { quotaTooLarge: this.quotaTooLarge } : {}),
      ...(this.derived !== undefined ? { derivedQuotaBytes: this.derived } : {}),
      ...this.auditLostStatus(),
      ...(this.cannotHelp ? { pruneCannotHelp: this.cannotHelp } : {}),
      keepRecentHours: this.keepRecentHours(),
      ...(this.runway ? { runway: { ...this.runway } } : {}),
    };
  }

  /**
   * Once a minute: the newest scan id, for the rate of the last day, and the estimate of how long
   * the free space lasts at it. Two seeks and two pragmas, no count of rows.
   */
  private sampleRunway(): void {
    const { store } = this.options;
    if (store.path === ':memory:') return;
    const at = this.now();
    const last = this.idSamples.at(-1);
    if (last && at - last.at < RUNWAY_SAMPLE_MS) return;
    const span = store.pruning.scanIdSpan();
    this.idSamples.push({ at, lastId: span.last });
    while (this.idSamples.length > 2 && at - this.idSamples[1]!.at >= RUNWAY_WINDOW_MS)
      this.idSamples.shift();
    const free = this.lastFree ?? this.stat()?.free;
    this.runway =
      free === undefined
        ? undefined
        : estimateRunway({
            samples: this.idSamples,
            freeBytes: free,
            lowFreeBytes: this.lowFreeMark(),
            usedBytes: store.space.usedBytes(),
            scansHeld: span.last > 0 ? span.last - span.first + 1 : 0,
          });
  }

  private keepRecentHours(): number {
    return this.options.keepRecentHours ?? 24;
  }

  /** Changes the protected window of early pruning (a reload of `buffer.earlyPruneKeepHours`). */
  setKeepRecentHours(hours: number): void {
    this.options.keepRecentHours = hours;
  }

  /** The early prunes of the last audit period, summed ({@link DiskGuardStatus.auditLost}). */
  private auditLostStatus(): Pick<DiskGuardStatus, 'auditLost'> {
    const since = new Date(
      this.now() - this.options.retention.retentionDays * 24 * 3600_000,
    ).toISOString();
    const recent = this.earlyPrunes.filter((p) => p.at >= since);
    const last = recent[recent.length - 1];
    if (!last) return {};
    let first: string | undefined;
    let latest: string | undefined;
    for (const p of recent) {
      if (p.firstReadAt && (first === undefined || p.firstReadAt < first)) first = p.firstReadAt;
      if (p.lastReadAt && (latest === undefined || p.lastReadAt > latest)) latest = p.lastReadAt;
    }
    return {
      auditLost: {
        scans: recent.reduce((n, p) => n + p.scans, 0),
        ...(first ? { firstReadAt: first } : {}),
        ...(latest ? { lastReadAt: latest } : {}),
        at: last.at,
        reason: last.reason,
      },
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
    if (
      this.now() - this.quotaCheckedAt <
      (quota === undefined ? DERIVED_QUOTA_RECHECK_MS : 60_000)
    )
      return;
    this.quotaCheckedAt = this.now();
    const s = this.stat();
    if (!s) return;
    const d = derivedQuota(
      s,
      bufferFileBytes(this.options.store.path),
      this.reserve.held,
      this.reserveSize,
      this.lowFreeMark(),
    );
    if (quota === undefined) {
      const previous = this.derivedLogged;
      this.derived = d.bytes;
      // Logged at start and when it moved by a tenth since, not at every check.
      if (previous === undefined || Math.abs(d.bytes - previous) > previous * 0.1) {
        this.derivedLogged = d.bytes;
        this.options.logger.info(
          {
            quotaBytes: d.bytes,
            diskHoldsBytes: d.holdsBytes,
            ceilingBytes: d.ceilingBytes,
            freeBytes: s.free,
            lowFreeBytes: this.lowFreeMark(),
          },
          previous === undefined
            ? 'buffer.maxBytes not set: the byte quota is derived from the disk, so that it is reached before the disk is full'
            : 'byte quota derived from the disk changed',
        );
      }
      this.options.onDerivedQuota?.(d.bytes, d.ceilingBytes);
      return;
    }
    const next = quota > d.holdsBytes ? quotaTooLargeText(quota, d.holdsBytes) : undefined;
    if (next !== undefined && this.quotaTooLarge === undefined)
      this.options.logger.warn({ quotaBytes: quota, diskHoldsBytes: d.holdsBytes }, next);
    this.quotaTooLarge = next;
  }

  private async checkOnce(): Promise<void> {
    this.checkQuotaFits();
    this.sampleRunway();
    const { retention, logger } = this.options;
    const step = this.options.step ?? 2000;
    const total: { scans: number; reads: number; batches: number } & {
      firstReadAt?: string;
      lastReadAt?: string;
    } = { scans: 0, reads: 0, batches: 0 };
    let reason: string | undefined;
    // The episode's instant: the record of the prune and the references it took share it.
    const episodeAt = new Date(this.now()).toISOString();
    // Bounded: each step removes `step` scans or ends the loop (nothing delivered left).
    let pressured = false;
    while (this.underPressure()) {
      pressured = true;
      // Only on SQLITE_FULL, when intake is already paused: released on mere low space, the reserve
      // would be filled by intake, and delivery would find no room when the disk is full.
      const full = this.fullReported;
      if (full) {
        this.reserve.release();
        // The log first: what delivery and intake wrote before the disk filled may hold the room.
        this.returnPages();
      }
      // Smaller steps on a full disk: each one's deletes must fit in what the log can still take.
      let want = full ? Math.min(step, 500) : step;
      const keepFrom = new Date(this.now() - this.keepRecentHours() * 3600_000).toISOString();
      const s = this.stat();
      if (
        !full &&
        s &&
        s.free < this.lowFreeMark() &&
        this.cannotHelp !== undefined &&
        this.now() - this.cannotHelpAt < CANNOT_HELP_RECHECK_MS &&
        s.free <= this.cannotHelpFree
      ) {
        // Still cannot help, nothing freed meanwhile: the counts (a scan of the buffer's rows) are
        // not taken again at every check.
        this.fullReported = false;
        break;
      }
      if (s && s.free < this.lowFreeMark()) {
        // Only what frees the shortfall, and nothing when it cannot be freed (early-prune-plan.ts).
        const { store } = this.options;
        const plan = planEarlyPrune({
          freeBytes: s.free,
          lowFreeBytes: this.lowFreeMark(),
          usedBytes: store.space.usedBytes(),
          freePageBytes: store.space.freeBytes(),
          scanRows: store.pruning.scanRows(),
          eligibleScans: store.pruning.eligibleScans(keepFrom),
        });
        if (plan.kind === 'none') {
          // The free pages inside the file cover it: returned without deleting anything.
          this.returnPages();
          break;
        }
        if (plan.kind === 'cannotHelp') {
          const text = `pruning cannot help: ${plan.neededBytes} bytes needed, at most ${plan.recoverableBytes} recoverable from delivered scans older than ${this.keepRecentHours()} h; nothing was pruned`;
          if (this.cannotHelp === undefined)
            logger.warn(
              {
                freeBytes: s.free,
                lowFreeBytes: this.lowFreeMark(),
                neededBytes: plan.neededBytes,
                recoverableBytes: plan.recoverableBytes,
                keepRecentHours: this.keepRecentHours(),
              },
              `buffer disk is low and ${text}`,
            );
          this.cannotHelp = text;
          this.cannotHelpAt = this.now();
          this.cannotHelpFree = s.free;
          // SQLITE_FULL: writes fail now. The mark is out of reach, but one small step gives
          // delivery room to record its batches (and so to make more scans delivered); the
          // next check, without the report, prunes nothing again.
          if (!full) {
            this.fullReported = false;
            break;
          }
        } else want = Math.min(want, plan.scans);
      }
      let r;
      try {
        r = await retention.pruneOldestDelivered(want, keepFrom, episodeAt);
      } finally {
        this.returnPages();
      }
      if (r.firstReadAt && (!total.firstReadAt || r.firstReadAt < total.firstReadAt))
        total.firstReadAt = r.firstReadAt;
      if (r.lastReadAt && (!total.lastReadAt || r.lastReadAt > total.lastReadAt))
        total.lastReadAt = r.lastReadAt;
      if (!reason) reason = this.pressureReason(full, s);
      total.scans += r.scans;
      total.reads += r.reads;
      total.batches += r.batches;
      this.fullReported = false;
      this.lastFailure = undefined;
      if (r.scans === 0) {
        if (total.scans === 0 && !this.nothingLeftWarned) {
          logger.warn(
            { freeBytes: this.lastFree, lowFreeBytes: this.lowFreeMark() },
            'buffer disk is low and no delivered scans are left to prune: only undelivered data remains',
          );
        }
        this.nothingLeftWarned = true;
        break;
      }
      this.nothingLeftWarned = false;
    }
    if (!pressured) {
      this.nothingLeftWarned = false;
      this.cannotHelp = undefined;
    }
    if (total.scans > 0) {
      this.cannotHelp = undefined;
      this.pruned += total.scans;
      const at = episodeAt;
      this.lastEarly = { at, scans: total.scans, reads: total.reads, batches: total.batches };
      const record: EarlyPruneRecord = {
        at,
        reason: reason ?? 'the buffer disk ran low',
        scans: total.scans,
        ...(total.firstReadAt ? { firstReadAt: total.firstReadAt } : {}),
        ...(total.lastReadAt ? { lastReadAt: total.lastReadAt } : {}),
      };
      this.earlyPrunes.push(record);
      try {
        this.options.store.pruning.recordEarlyPrune(record);
      } catch (err) {
        // The page and the log still say it; only `trace` after a restart would not know.
        logger.warn({ err }, 'remembering an early prune in the buffer failed');
      }
      logger.warn(
        {
          ...total,
          reason: record.reason,
          freeBytes: this.lastFree,
          lowFreeBytes: this.lowFreeMark(),
          prunedEarlyScans: this.pruned,
          keepRecentHours: this.keepRecentHours(),
        },
        'buffer disk is low: pruned the oldest delivered scans before their audit period ended, only what frees the shortfall (undelivered scans are kept)',
      );
    }
    if (this.reserve.released && this.reserveSize > 0) {
      // Room for the reserve and back-pressure's resume mark besides, not the low-space mark: intake
      // resumes only once the reserve is back, and between the two marks nothing would be pruned
      // to make room for it (nothing is under pressure there), so intake would wait for ever.
      const free = this.stat()?.free ?? 0;
      if (free >= this.reserveSize + RESUME_FREE_BYTES) this.reserve.write();
    }
  }

  /** Why early pruning ran, in words, for the log and the record `trace` reads. */
  private pressureReason(full: boolean, s: { free: number } | undefined): string {
    if (full) return 'SQLite reported the disk full';
    if (s && s.free < this.lowFreeMark())
      return `the disk ran low: ${s.free} bytes free, below the mark of ${this.lowFreeMark()}`;
    return 'the buffer neared its page limit (max_page_count)';
  }

  /** Free space below the mark, SQLITE_FULL reported, or (tests, embedded limits) `max_page_count` nearly reached. */
  private underPressure(): boolean {
    if (this.fullReported) return true;
    const s = this.stat();
    if (s && s.free < this.lowFreeMark()) return true;
    return this.options.store.space.nearPageLimit();
  }

  /**
   * Returns freed pages to the file system and empties the write-ahead log, in steps of
   * {@link VACUUM_STEP_PAGES} pages with a checkpoint after each: a single `incremental_vacuum`
   * of every free page writes the pages it moves to the log in one transaction, and on a full
   * disk the log cannot take them; it then fails at every check and the pages never come back
   * (seen on the tmpfs test: 4,000 pruned scans held inside a file that filled the disk).
   */
  private returnPages(): void {
    const space = this.options.store.space;
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
      if (isDiskFull(err)) this.reserve.releaseLastResort();
      try {
        space.checkpointTruncate();
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
   * A buffer made before `auto_vacuum = INCREMENTAL` (new buffers get it at creation) keeps freed
   * pages inside its file. Switching needs one `VACUUM`, which rewrites the whole file and needs
   * about its size again in free space; so it runs only at start, only up to `maxVacuumBytes`,
   * only with room for it, and is logged with its duration.
   */
  private switchToIncrementalVacuum(): void {
    const { store, logger } = this.options;
    if (store.path === ':memory:') return;
    const space = store.space;
    if (space.incrementalAutoVacuum()) return;
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
      space.switchToIncrementalVacuum();
      logger.info({ bytes, ms: Date.now() - t0 }, 'buffer switched to incremental auto-vacuum');
    } catch (err) {
      this.vacuumPending = `switching the buffer to incremental auto-vacuum failed: ${(err as Error).message}`;
      logger.warn({ err }, this.vacuumPending);
    }
  }
}
