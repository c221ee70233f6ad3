/**
 * Scanners often read the same label twice within a second. The same reference at the same DCP
 * within the DCP's window is a duplicate read: counted, stored as such, not sent again.
 *
 * Kept in memory, and rebuilt at start from the scans committed within each DCP's window
 * by intake (src/intake/duplicates.ts), so a restart does not let a duplicate through.
 *
 * Bounded: at most `maxEntries` references in all (default {@link DUPLICATE_WINDOW_MAX_ENTRIES});
 * at the bound the reference taken longest ago is dropped first. A repeat of a dropped reference
 * within its window is then taken as a scan and sent again, as if the window were shorter:
 * nothing is lost, and `evicted` counts how often that could happen (docs/operations.md, "Bounds").
 */
export const DUPLICATE_WINDOW_MAX_ENTRIES = 200_000;

export class DuplicateWindow {
  /** `dcpKey \0 reference` → instant taken (ms), in the order taken (oldest first). */
  private readonly seen = new Map<string, number>();
  private lastSweep = 0;
  private largestWindowMs = 0;
  /** References dropped at the bound while possibly still within their window. */
  evicted = 0;

  constructor(private readonly maxEntries = DUPLICATE_WINDOW_MAX_ENTRIES) {}

  /**
   * Answers true when `reference` was taken at `dcpKey` less than `windowMs` before (or after)
   * `atMs`; otherwise records it and answers false. A window of 0 turns the check off.
   */
  check(dcpKey: string, reference: string, atMs: number, windowMs: number): boolean {
    if (windowMs <= 0) return false;
    const key = `${dcpKey}\u0000${reference}`;
    const last = this.seen.get(key);
    if (last !== undefined && Math.abs(atMs - last) < windowMs) return true;
    this.take(key, atMs, windowMs);
    return false;
  }

  /**
   * Records a reference taken before (a scan found in the buffer at start), keeping the later of
   * two instants. `windowMs` is its DCP's window (for the sweep).
   */
  restore(dcpKey: string, reference: string, atMs: number, windowMs: number): void {
    if (windowMs <= 0) return;
    const key = `${dcpKey}\u0000${reference}`;
    const last = this.seen.get(key);
    if (last !== undefined && last >= atMs) return;
    this.take(key, atMs, windowMs);
  }

  /** Forgets a reference taken at `atMs`, when the commit that took it failed. */
  forget(dcpKey: string, reference: string, atMs: number): void {
    const key = `${dcpKey}\u0000${reference}`;
    if (this.seen.get(key) === atMs) this.seen.delete(key);
  }

  get size(): number {
    return this.seen.size;
  }

  private take(key: string, atMs: number, windowMs: number): void {
    // Delete first, so the Map's order stays the order taken (the bound drops the oldest).
    this.seen.delete(key);
    this.seen.set(key, atMs);
    this.largestWindowMs = Math.max(this.largestWindowMs, windowMs);
    while (this.seen.size > this.maxEntries) {
      const oldest = this.seen.keys().next().value;
      if (oldest === undefined) break;
      this.seen.delete(oldest);
      this.evicted++;
    }
    this.sweep(atMs);
  }

  private sweep(nowMs: number): void {
    // Drop entries older than the largest window in use, at most once per window.
    if (nowMs - this.lastSweep < this.largestWindowMs) return;
    this.lastSweep = nowMs;
    const horizon = nowMs - Math.max(this.largestWindowMs * 2, 60_000);
    for (const [key, at] of this.seen) if (at < horizon) this.seen.delete(key);
  }
}
