import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '../log.js';
import type { BufferStore, BufferTotals } from './store.js';
import { isDiskFull } from '../errors.js';
import type { Clock } from '../clock.js';

/** The buffer quota (config `buffer`): what undelivered data may take before intake slows down. */
export interface QuotaLimits {
  /** Most undelivered scans (pending, or in a batch not yet finished upstream). */
  maxPendingScans: number;
  /** Most bytes of undelivered scans (their JSON as it will be sent). */
  maxBytes: number;
  /** Share of either limit at which inputs that can wait are paused, e.g. 0.9. */
  pauseAtRatio: number;
  /** Share below which they are resumed (lower than `pauseAtRatio`, so they do not flap), e.g. 0.8. */
  resumeAtRatio: number;
}

/**
 * `ok`: below the pause mark. `paused`: inputs that can wait are paused; the others still commit.
 * `full`: the quota is reached; commits that add scans are refused (the source keeps them).
 */
export type QuotaLevel = 'ok' | 'paused' | 'full';

/** What the health page shows of the quota and the disk. */
export interface BackPressureStatus {
  level: QuotaLevel;
  /** Inputs that can wait are told to pause (quota or full disk). */
  intakePaused: boolean;
  undeliveredScans: number;
  undeliveredBytes: number;
  maxPendingScans: number;
  maxBytes: number;
  /** The larger of the two shares used, 0..1 (may exceed 1 briefly: replay is not refused). */
  usedRatio: number;
  /** Set while SQLite reports the disk full (SQLITE_FULL): intake is stopped until room returns. */
  diskFull?: { since: string; message: string };
  /** Commits refused because the quota was reached, since start. */
  refusedCommits: number;
}

export interface BackPressureOptions {
  store: BufferStore;
  limits: QuotaLimits;
  logger: Logger;
  /** Called when inputs that can wait must pause (true) or may resume (false). */
  onPausedChange?: (paused: boolean, why: string) => void;
  /** How often the totals are read again (delivery drains the buffer) and a full disk is probed, in ms. Default 1000. */
  intervalMs?: number;
  now?: Clock;
  /** Free bytes on the buffer's file system; default `statfs` of the buffer's folder. */
  freeBytes?: () => number;
  /** A commit failed with SQLITE_FULL: the disk guard releases its reserve and prunes the audit. */
  onDiskFull?: () => void;
  /**
   * Whether the disk guard's reserve is written (again); default: always. After SQLITE_FULL intake
   * resumes only once it is: resumed on the room the released reserve left (or a checkpoint
   * freed), intake fills it at once, and at the next full disk delivery finds none.
   */
  reserveReady?: () => boolean;
}

/**
 * Free space needed on the buffer's file system before intake resumes after SQLITE_FULL. On a real
 * disk the rolled-back probe alone can succeed inside space the WAL file already holds, and intake
 * would resume only to fail again at once.
 */
export const RESUME_FREE_BYTES = 8 * 1024 * 1024;

function statfsFree(path: string): number {
  if (path === ':memory:') return Number.MAX_SAFE_INTEGER;
  const fs = statfsSync(dirname(path));
  return fs.bavail * fs.bsize;
}

/**
 * Back-pressure on intake. The totals come from the trigger-maintained
 * `buffer_totals` row, so every check is one row read. Near the quota (`pauseAtRatio`), inputs
 * that can wait (those implementing `InputAdapter.setPaused`: files, MQTT) are paused; inputs that
 * cannot (serial) keep committing until the quota itself is reached, after which commits adding
 * scans are refused and the input keeps its reads (serial: in memory, up to its own limit) and
 * retries. A full disk pauses intake the same way until the file system has
 * {@link RESUME_FREE_BYTES} free and a 64 KiB write (rolled back) goes through.
 */
export class BackPressure {
  private level: QuotaLevel = 'ok';
  private paused = false;
  private diskFull: { since: string; message: string } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private refused = 0;
  private readonly now: Clock;
  /** The limits in force: a copy, as a byte quota derived from the disk changes ({@link setByteQuota}). */
  private readonly limits: QuotaLimits;
  /** Bytes above which one submit is never taken; the byte quota unless one derived from the disk has a ceiling. */
  private neverBytes: number | undefined;

  constructor(private readonly options: BackPressureOptions) {
    this.now = options.now ?? Date.now;
    this.limits = { ...options.limits };
  }

  /**
   * The byte quota derived from the disk changed (`buffer.maxBytes` not set): `bytes`
   * applies from now on; `ceilingBytes`, the most it can ever become on this disk, is what
   * {@link tooLarge} compares with, so a submit is not given up on because the disk is fuller today.
   * Reads the totals again at once (a smaller quota may pause intake).
   */
  setByteQuota(bytes: number, ceilingBytes: number): void {
    this.neverBytes = Math.max(bytes, ceilingBytes);
    if (bytes === this.limits.maxBytes) return;
    this.limits.maxBytes = bytes;
    this.check();
  }

  start(): void {
    this.check();
    this.timer = setInterval(() => {
      try {
        this.check();
      } catch (err) {
        this.options.logger.error({ err }, 'buffer quota check failed');
      }
    }, this.options.intervalMs ?? 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Why one submit can never be stored, however far delivery drains: it alone holds more scans or
   * bytes than the quota. Its source should give up on it (a file goes to failed/), instead of
   * retrying for ever and pausing every input each time.
   */
  tooLarge(scans: number, bytes: number): string | undefined {
    const { maxPendingScans } = this.limits;
    const maxBytes = this.neverBytes ?? this.limits.maxBytes;
    if (scans <= maxPendingScans && bytes <= maxBytes) return undefined;
    return (
      `larger than the whole buffer quota: ${scans} scans (${bytes} bytes) at once, the quota allows ` +
      `${maxPendingScans} scans (buffer.maxPendingScans) and ${maxBytes} bytes (${this.neverBytes !== undefined ? 'the most the disk can hold; buffer.maxBytes is not set' : 'buffer.maxBytes'}); split it, or raise the quota`
    );
  }

  /**
   * Whether a commit adding `scans` scans of `bytes` bytes fits under the quota. Answers the reason
   * when it does not (the commit is then refused and the source keeps its reads).
   */
  admit(scans: number, bytes: number): string | undefined {
    if (scans === 0) return undefined;
    const { maxPendingScans, maxBytes } = this.limits;
    const t = this.groupTotals ?? this.options.store.reports.totals();
    if (t.undeliveredScans + scans > maxPendingScans || t.undeliveredBytes + bytes > maxBytes) {
      this.refused++;
      this.setLevel('full', t.undeliveredScans, t.undeliveredBytes);
      return `the buffer quota is reached (${t.undeliveredScans} undelivered scans, ${t.undeliveredBytes} bytes; limits ${maxPendingScans} scans, ${maxBytes} bytes): new scans are refused until delivery drains it`;
    }
    return undefined;
  }

  /**
   * A group commit begins: its submits are admitted against one reading of the totals (nothing
   * commits between them), instead of one SQLite read per submit.
   */
  beginGroup(): void {
    this.groupTotals = this.options.store.reports.totals();
  }
  private groupTotals: BufferTotals | undefined;

  /** A commit failed: a full disk stops intake until {@link check} finds room again. */
  commitFailed(err: unknown): void {
    this.groupTotals = undefined;
    this.diskFullSeen(err);
  }

  /**
   * SQLITE_FULL seen anywhere (a commit, or a delivery step): intake stops until {@link check}
   * finds room again, and only then is the disk guard told (`onDiskFull`), so the reserve it
   * releases is left to delivery and pruning and not filled by intake. Other errors
   * are ignored.
   */
  diskFullSeen(err: unknown): void {
    if (!isDiskFull(err)) return;
    if (!this.diskFull) {
      this.diskFull = {
        since: new Date(this.now()).toISOString(),
        message: (err as Error).message,
      };
      this.options.logger.fatal(
        { err, path: this.options.store.path },
        'buffer disk is full (SQLITE_FULL): intake stopped, nothing is acknowledged; it resumes by itself when there is room again',
      );
      this.updatePaused();
    }
    // After the pause: the disk guard's reserve it now releases is for delivery and pruning, not intake.
    this.options.onDiskFull?.();
  }

  /**
   * While SQLite reports the disk full (until {@link check} finds room again), why nothing may be
   * written: intake refuses every submit, as a commit failing with SQLITE_FULL would, so that the
   * retries of reads already in flight (an MQTT message, a file's chunk, a serial read) do not take
   * the room the released reserve left to delivery and pruning. `undefined` otherwise.
   */
  writesRefused(): string | undefined {
    return this.diskFull
      ? `the buffer's disk is full since ${this.diskFull.since} (${this.diskFull.message}): nothing is stored until there is room again`
      : undefined;
  }

  /** A commit went through: the disk has room; and the totals grew, so the pause mark is checked at once. */
  commitSucceeded(): void {
    this.groupTotals = undefined;
    if (this.diskFull) this.clearDiskFull('a commit went through');
    this.check();
  }

  /** Reads the totals again (and probes a full disk); pauses or resumes inputs that can wait. */
  check(): void {
    if (this.diskFull) {
      let room = false;
      try {
        const free = (this.options.freeBytes ?? (() => statfsFree(this.options.store.path)))();
        room =
          free >= RESUME_FREE_BYTES &&
          (this.options.reserveReady?.() ?? true) &&
          this.options.store.space.probeSpace();
      } catch (err) {
        this.options.logger.warn({ err }, 'probing the buffer disk failed');
      }
      if (room) this.clearDiskFull('the disk has room again');
    }
    const t = this.options.store.reports.totals();
    const ratio = this.ratio(t.undeliveredScans, t.undeliveredBytes);
    const { pauseAtRatio, resumeAtRatio } = this.limits;
    let level: QuotaLevel;
    if (ratio >= 1) level = 'full';
    else if (ratio >= pauseAtRatio) level = 'paused';
    else if (this.level !== 'ok' && ratio >= resumeAtRatio) level = 'paused';
    else level = 'ok';
    this.setLevel(level, t.undeliveredScans, t.undeliveredBytes);
  }

  snapshot(): BackPressureStatus {
    const t = this.options.store.reports.totals();
    const { maxPendingScans, maxBytes } = this.limits;
    return {
      level: this.level,
      intakePaused: this.paused,
      undeliveredScans: t.undeliveredScans,
      undeliveredBytes: t.undeliveredBytes,
      maxPendingScans,
      maxBytes,
      usedRatio: this.ratio(t.undeliveredScans, t.undeliveredBytes),
      ...(this.diskFull ? { diskFull: { ...this.diskFull } } : {}),
      refusedCommits: this.refused,
    };
  }

  private ratio(scans: number, bytes: number): number {
    const { maxPendingScans, maxBytes } = this.limits;
    return Math.max(scans / maxPendingScans, bytes / maxBytes);
  }

  private clearDiskFull(why: string): void {
    const since = this.diskFull?.since;
    this.diskFull = undefined;
    this.options.logger.warn({ since, why }, 'buffer disk has room again: intake resumes');
    this.updatePaused();
  }

  private setLevel(level: QuotaLevel, scans: number, bytes: number): void {
    if (level !== this.level) {
      const { maxPendingScans, maxBytes } = this.limits;
      const log =
        level === 'ok'
          ? this.options.logger.info.bind(this.options.logger)
          : this.options.logger.warn.bind(this.options.logger);
      // `quotaLevel`, not `level`: pino's own `level` is the log level, and jq would read the wrong one.
      log(
        {
          quotaLevel: level,
          from: this.level,
          undeliveredScans: scans,
          undeliveredBytes: bytes,
          maxPendingScans,
          maxBytes,
        },
        `buffer quota level ${level}`,
      );
      this.level = level;
    }
    this.updatePaused();
  }

  private updatePaused(): void {
    const paused = this.level !== 'ok' || this.diskFull !== undefined;
    if (paused === this.paused) return;
    this.paused = paused;
    const why = this.diskFull
      ? 'buffer disk full'
      : paused
        ? `buffer quota level ${this.level}`
        : 'buffer drained below the resume mark';
    this.options.onPausedChange?.(paused, why);
  }
}
