import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { DERIVED_QUOTA_RECHECK_MS, derivedQuota, quotaTooLargeText } from './disk-quota.js';
import { bufferFileBytes } from './disk-usage.js';

/** What {@link QuotaWatch} reads of the disk guard's options, at each check (a reload may change them). */
export interface QuotaWatchOptions {
  /** The buffer's file (`:memory:` never gets here: its `stat` is `undefined`). */
  store: { path: string };
  logger: Logger;
  /** The configured byte quota (`buffer.maxBytes`), checked against what the disk can hold. */
  quotaBytes?: number;
  /** Called with the derived byte quota and its ceiling when `quotaBytes` is not set. */
  onDerivedQuota?: (bytes: number, ceilingBytes: number) => void;
}

/** The disk as the guard knows it at a check: asked lazily, only when a recheck is due. */
export interface QuotaWatchDisk {
  /** Free and total bytes of the buffer's file system, or `undefined` for a buffer in memory. */
  stat: () => { free: number; size: number } | undefined;
  /** Bytes of the reserve file now held. */
  reserveHeld: () => number;
  /** Size of the reserve when written, bytes. */
  reserveSize: number;
  /** The low-space mark, bytes. */
  lowFreeMark: () => number;
}

/**
 * Whether the configured byte quota fits the disk, or (not configured) the quota derived from it,
 * for the disk guard (src/buffer/disk-guard.ts): its own clock of rechecks and what it last logged,
 * so that the guard's prune loop is not interleaved with it.
 */
export class QuotaWatch {
  private checkedAt = -Infinity;
  private derivedLogged: number | undefined;
  /** The byte quota derived from the disk (bytes of scan JSON), once derived. */
  derived: number | undefined;
  /** Why the configured quota is larger than the disk can hold, while it is. */
  tooLarge: string | undefined;

  constructor(
    private readonly options: QuotaWatchOptions,
    private readonly now: Clock,
  ) {}

  /**
   * Whether the configured byte quota fits the disk, or (not configured) the quota derived from it:
   * the buffer's files and the free space, less the reserve, the low-space mark and the log's room, against the
   * quota times {@link DISK_BYTES_PER_QUOTA_BYTE} (see {@link derivedQuota}). Rechecked every
   * second when derived, every minute when configured (another program's files change what is
   * left); logged when it changes.
   */
  check(disk: QuotaWatchDisk): void {
    const quota = this.options.quotaBytes;
    if (quota === undefined && !this.options.onDerivedQuota) return;
    // A derived quota follows the disk within a second: files landing in an inbox on the same file
    // system take room the quota was counting on. A configured one is only compared, each minute.
    if (this.now() - this.checkedAt < (quota === undefined ? DERIVED_QUOTA_RECHECK_MS : 60_000))
      return;
    this.checkedAt = this.now();
    const s = disk.stat();
    if (!s) return;
    const d = derivedQuota(
      s,
      bufferFileBytes(this.options.store.path),
      disk.reserveHeld(),
      disk.reserveSize,
      disk.lowFreeMark(),
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
            lowFreeBytes: disk.lowFreeMark(),
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
    if (next !== undefined && this.tooLarge === undefined)
      this.options.logger.warn({ quotaBytes: quota, diskHoldsBytes: d.holdsBytes }, next);
    this.tooLarge = next;
  }
}
