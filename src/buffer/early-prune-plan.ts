/**
 * How many delivered scans an early prune takes (disk-guard.ts): only what frees the shortfall,
 * and nothing when even every scan it may take would not. Pure arithmetic, so that the rule is
 * tested without a disk.
 *
 * The bytes a scan frees are estimated as the buffer's pages in use divided by its scan rows: a
 * scan's row, its body, its read, its keys and their index entries, on average. Reads without a
 * scan (no-reads, duplicates) and batches make the estimate a little high, which errs toward
 * pruning slightly fewer, then measuring again at the next check.
 */

/** What the plan is computed from. */
export interface EarlyPruneInput {
  /** Free bytes on the buffer's file system now. */
  freeBytes: number;
  /** The low-space mark (`lowFreeBytes`): free space to get back to. */
  lowFreeBytes: number;
  /** Bytes of the buffer's pages in use. */
  usedBytes: number;
  /** Bytes of free pages inside the file: returned to the disk by the next vacuum, no prune needed. */
  freePageBytes: number;
  /** Scan rows in the buffer, of every state. */
  scanRows: number;
  /** Delivered scans early pruning may take (of batches finished before the protected window). */
  eligibleScans: number;
}

/** The plan: prune `scans`, or nothing because it cannot help (`neededBytes` > `recoverableBytes`). */
export type EarlyPrunePlan =
  | { kind: 'none'; shortfallBytes: 0 }
  | { kind: 'prune'; scans: number; shortfallBytes: number; bytesPerScan: number }
  | { kind: 'cannotHelp'; neededBytes: number; recoverableBytes: number };

/**
 * The shortfall is `lowFreeBytes − freeBytes`, less the free pages the vacuum returns anyway. When
 * every eligible scan would free less than that, nothing is pruned (deleting the audit would not
 * save intake); otherwise the fewest scans whose estimated bytes cover it, at least one.
 */
export function planEarlyPrune(i: EarlyPruneInput): EarlyPrunePlan {
  const shortfall = i.lowFreeBytes - i.freeBytes - i.freePageBytes;
  if (shortfall <= 0) return { kind: 'none', shortfallBytes: 0 };
  const bytesPerScan = i.scanRows > 0 ? i.usedBytes / i.scanRows : 0;
  const recoverable = Math.floor(bytesPerScan * i.eligibleScans);
  if (recoverable < shortfall)
    return { kind: 'cannotHelp', neededBytes: shortfall, recoverableBytes: recoverable };
  const scans = Math.min(i.eligibleScans, Math.max(1, Math.ceil(shortfall / bytesPerScan)));
  return { kind: 'prune', scans, shortfallBytes: shortfall, bytesPerScan };
}
