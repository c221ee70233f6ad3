import type { IntakeWrites } from '../buffer/intake-writes.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { DUPLICATE_WINDOW_MAX_ENTRIES, DuplicateWindow } from '../mapping/duplicate-window.js';
import type { MappingContext } from '../mapping/map-read.js';

/** A reference a submit took into the window, forgotten again when its commit does not happen. */
export interface TakenReference {
  dcpKey: string;
  reference: string;
  atMs: number;
}

/**
 * The running gateway's duplicate window, owned by intake in this one place: the instance, its
 * rebuild from the buffer at start, its check of each mapped scan, the forgetting of what a
 * refused or failed commit took, and the warning at its bound.
 *
 * The window itself (src/mapping/duplicate-window.ts) stays a pure structure of the mapping: the
 * `try` command and the mapping's tests use it without a buffer, and the rule (same reference,
 * same DCP, within the DCP's window) is the mapping's. What makes it the gateway's window is its
 * state across commits and restarts, and only intake knows both: what was committed (the buffer)
 * and what a commit took back (a refusal, a full disk). Hence the instance lives here, not in the
 * mapping (which has no buffer) nor in the buffer (which may not import the mapping).
 */
export class IntakeDuplicates {
  private readonly window = new DuplicateWindow();
  private evictionsLogged = 0;
  private evictionLoggedAt = -Infinity;

  constructor(
    private readonly logger: Logger,
    private readonly now: Clock,
  ) {}

  /**
   * Fills the window with the scans committed within each DCP's `duplicateWindowMs` before now
   * (by commit time), newest first, so a read repeated across a restart is still a duplicate.
   * Reads at most the window's bound of rows. Answers how many references it took.
   */
  rebuild(writes: IntakeWrites, mapping: MappingContext): number {
    const windows = new Map<string, number>();
    for (const [key, dcp] of mapping.dcps)
      if (dcp.duplicateWindowMs > 0) windows.set(key, dcp.duplicateWindowMs);
    if (windows.size === 0) return 0;
    const nowMs = this.now();
    const horizon = nowMs - Math.max(...windows.values());
    const rows = writes.recentScans(horizon, DUPLICATE_WINDOW_MAX_ENTRIES);
    let restored = 0;
    // Oldest first, so the window's own order (what its bound drops first) is the order taken.
    for (let i = rows.length - 1; i >= 0; i--) {
      const r = rows[i]!;
      const windowMs = windows.get(r.dcpKey);
      if (windowMs === undefined || r.createdAt < nowMs - windowMs) continue;
      this.window.restore(r.dcpKey, r.reference, Date.parse(r.timeUtc), windowMs);
      restored++;
    }
    if (restored > 0)
      this.logger.info(
        { references: restored },
        'duplicate window rebuilt from the scans committed within it',
      );
    return restored;
  }

  /**
   * Whether `reference` at `dcpKey` is a duplicate within `windowMs` of `atMs` (see
   * {@link DuplicateWindow.check}); when not, it is taken into the window.
   */
  check(dcpKey: string, reference: string, atMs: number, windowMs: number): boolean {
    const duplicate = this.window.check(dcpKey, reference, atMs, windowMs);
    if (this.window.evicted > this.evictionsLogged) this.logEvictions();
    return duplicate;
  }

  /** Forgets what a submit took: its commit was refused or failed, so the source's retry is not a duplicate. */
  forget(taken: readonly TakenReference[]): void {
    for (const t of taken) this.window.forget(t.dcpKey, t.reference, t.atMs);
  }

  /** At the window's bound: once per 10 minutes, with how many references it dropped. */
  private logEvictions(): void {
    const at = this.now();
    if (at - this.evictionLoggedAt < 600_000) return;
    this.logger.warn(
      { dropped: this.window.evicted - this.evictionsLogged, bound: DUPLICATE_WINDOW_MAX_ENTRIES },
      'duplicate window full: the oldest references were dropped, so a repeat of one of them within its window is sent again',
    );
    this.evictionsLogged = this.window.evicted;
    this.evictionLoggedAt = at;
  }
}
