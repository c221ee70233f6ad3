/**
 * Scanners often read the same label twice within a second. The same reference at the same DCP
 * within the DCP's window is a duplicate read: counted, stored as such, not sent again.
 * Kept in memory: after a restart the first read of a reference is always taken.
 */
export class DuplicateWindow {
  private readonly seen = new Map<string, Map<string, number>>();
  private lastSweep = 0;
  private largestWindowMs = 0;

  /**
   * Answers true when `reference` was taken at `dcpKey` less than `windowMs` before `atMs`;
   * otherwise records it and answers false. A window of 0 turns the check off.
   */
  check(dcpKey: string, reference: string, atMs: number, windowMs: number): boolean {
    if (windowMs <= 0) return false;
    let perDcp = this.seen.get(dcpKey);
    if (!perDcp) {
      perDcp = new Map();
      this.seen.set(dcpKey, perDcp);
    }
    const last = perDcp.get(reference);
    if (last !== undefined && Math.abs(atMs - last) < windowMs) return true;
    perDcp.set(reference, atMs);
    this.largestWindowMs = Math.max(this.largestWindowMs, windowMs);
    this.sweep(atMs);
    return false;
  }

  /** Forgets a reference taken at `atMs`, when the commit that took it failed. */
  forget(dcpKey: string, reference: string, atMs: number): void {
    const perDcp = this.seen.get(dcpKey);
    if (perDcp?.get(reference) === atMs) perDcp.delete(reference);
  }

  private sweep(nowMs: number): void {
    // Bounded memory: drop entries older than the largest window in use, at most once per window.
    if (nowMs - this.lastSweep < this.largestWindowMs) return;
    this.lastSweep = nowMs;
    const horizon = nowMs - Math.max(this.largestWindowMs * 2, 60_000);
    for (const perDcp of this.seen.values()) {
      for (const [ref, at] of perDcp) if (at < horizon) perDcp.delete(ref);
    }
  }
}
