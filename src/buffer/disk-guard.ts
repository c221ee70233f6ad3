import type { Clock } from '../clock.js';
import { isDiskFull } from '../errors.js';
import { RESUME_FREE_BYTES } from './back-pressure.js';
import {
  auditLostSince,
  type DiskGuardOptions,
  type DiskGuardStatus,
} from './disk-guard-status.js';
import { fileSystemSpace, returnPages, switchToIncrementalVacuum } from './disk-pages.js';
import { DEFAULT_RESERVE_BYTES, defaultLowFreeBytes } from './disk-quota.js';
import { QuotaWatch } from './disk-quota-watch.js';
import { planEarlyPrune } from './early-prune-plan.js';
import type { EarlyPruneRecord } from './early-prunes.js';
import type { PruneResult } from './pruning.js';
import { ReserveFile } from './reserve.js';
import { RunwaySampler } from './runway-sampler.js';

export type { DiskGuardOptions, DiskGuardStatus } from './disk-guard-status.js';
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

/** While pruning cannot help and no room came back, how often it is worked out again, in ms. */
const CANNOT_HELP_RECHECK_MS = 5000;

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
  private readonly quota: QuotaWatch;
  /** Logged once per episode of pressure with nothing delivered left, not every 250 ms. */
  private nothingLeftWarned = false;
  private lastFailure: string | undefined;
  /** The early prunes remembered in the buffer (loaded at start, appended at each prune). */
  private earlyPrunes: EarlyPruneRecord[] = [];
  private cannotHelp: string | undefined;
  private cannotHelpAt = -Infinity;
  private cannotHelpFree = 0;
  private readonly runwaySampler: RunwaySampler;

  /** Only keeps its options: {@link start} examines the disk and writes the reserve. */
  constructor(private readonly options: DiskGuardOptions) {
    this.now = options.now ?? Date.now;
    this.quota = new QuotaWatch(options, this.now);
    this.runwaySampler = new RunwaySampler(this.now);
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
    this.earlyPrunes = this.options.store.pruning.early.all();
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
      ...(this.quota.tooLarge ? { quotaTooLarge: this.quota.tooLarge } : {}),
      ...(this.quota.derived !== undefined ? { derivedQuotaBytes: this.quota.derived } : {}),
      ...this.auditLostStatus(),
      ...(this.cannotHelp ? { pruneCannotHelp: this.cannotHelp } : {}),
      keepRecentHours: this.keepRecentHours(),
      ...(this.runwaySampler.runway ? { runway: { ...this.runwaySampler.runway } } : {}),
    };
  }

  /** Once a minute, the sample and estimate of the runway (runway-sampler.ts). */
  private sampleRunway(): void {
    this.runwaySampler.sample(
      this.options.store,
      () => this.lastFree ?? this.stat()?.free,
      () => this.lowFreeMark(),
    );
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
    return auditLostSince(this.earlyPrunes, since);
  }

  /** The byte quota against the disk, or derived from it (disk-quota-watch.ts). */
  private checkQuotaFits(): void {
    this.quota.check({
      stat: () => this.stat(),
      reserveHeld: () => this.reserve.held,
      reserveSize: this.reserveSize,
      lowFreeMark: () => this.lowFreeMark(),
    });
  }

  private async checkOnce(): Promise<void> {
    this.checkQuotaFits();
    this.sampleRunway();
    const { retention, logger } = this.options;
    const step = this.options.step ?? 2000;
    const total: Omit<PruneResult, 'files'> = { scans: 0, reads: 0, batches: 0 };
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
      if (r.deadLetters) total.deadLetters = (total.deadLetters ?? 0) + r.deadLetters;
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
        this.options.store.pruning.early.record(record);
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

  private returnPages(): void {
    returnPages(this.options.store.space, this.reserve, this.options.logger);
  }

  /** Free and total bytes of the buffer's file system; the free bytes are kept for the status. */
  private stat(): { free: number; size: number } | undefined {
    const s = fileSystemSpace(this.options.store.path, this.options.statfs);
    if (s) this.lastFree = s.free;
    return s;
  }

  /** At start: an old buffer switched to incremental auto-vacuum, or why not (disk-pages.ts). */
  private switchToIncrementalVacuum(): void {
    const { store, logger } = this.options;
    this.vacuumPending = switchToIncrementalVacuum({
      path: store.path,
      space: store.space,
      logger,
      maxVacuumBytes: this.options.maxVacuumBytes,
      reserveSize: this.reserveSize,
      free: () => this.stat()?.free ?? 0,
    });
  }
}
