import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { EarlyPruneRecord } from './early-prunes.js';
import type { Retention } from './retention.js';
import type { Runway } from './runway.js';
import type { BufferStore } from './store.js';

/**
 * The disk guard's shapes (src/buffer/disk-guard.ts): what it is given, what the health page
 * shows of it, and the sum of the early prunes the buffer remembers. No I/O here.
 */

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

/**
 * The early prunes at or after `since` (ISO 8601), summed ({@link DiskGuardStatus.auditLost}):
 * their scans, the span of the read times of the scans they took, the latest one's time and
 * reason. Empty when there were none.
 */
export function auditLostSince(
  earlyPrunes: readonly EarlyPruneRecord[],
  since: string,
): Pick<DiskGuardStatus, 'auditLost'> {
  const recent = earlyPrunes.filter((p) => p.at >= since);
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
