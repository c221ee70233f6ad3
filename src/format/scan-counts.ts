/**
 * The words for the buffer's scan counts, shared by `scan-gateway buffer stats` (src/cli/ops-format.ts)
 * and the health page (src/health/page-cards.ts), so the two say the same things in the same order
 * (docs/operations.md, "Scan counts").
 */

/** The order the states are listed in, wherever they are: the way a scan goes, then the dead letters replaced. */
export const SCAN_STATE_ORDER: readonly string[] = [
  'pending',
  'batched',
  'delivered',
  'failed',
  'held',
  'replayed',
];

/** What the `delivered` count is, for a label: the rows kept, not all ever delivered. */
export const DELIVERED_MEANS = 'delivered scans still in the buffer (the audit trail)';

/**
 * `pending 4, delivered 339, replayed 25`: the counts by state in {@link SCAN_STATE_ORDER}, any
 * other state after them; `none` when empty. Counts with thousands separators when `fmt` says so.
 */
export function scanCountsText(
  counts: Readonly<Record<string, number>>,
  fmt: (n: number) => string = String,
): string {
  const known = SCAN_STATE_ORDER.filter((k) => counts[k] !== undefined);
  const others = Object.keys(counts)
    .filter((k) => !SCAN_STATE_ORDER.includes(k))
    .sort();
  const keys = [...known, ...others];
  return keys.length === 0 ? 'none' : keys.map((k) => `${k} ${fmt(counts[k]!)}`).join(', ');
}

/** The lifetime counts of pruned rows, as `OutboxCounts.pruned` gives them (src/buffer/outbox-counts.ts). */
export interface PrunedWords {
  deliveredScans: number;
  deliveredScansEarly: number;
  deadLetters: number;
}

/**
 * `73 delivered scans (48 of them before the end of their audit period), 25 replayed dead
 * letters`, or `none`. Counts with thousands separators when `fmt` says so (the page does).
 */
export function prunedText(p: PrunedWords, fmt: (n: number) => string = String): string {
  if (p.deliveredScans === 0 && p.deadLetters === 0) return 'none';
  const parts: string[] = [];
  if (p.deliveredScans > 0)
    parts.push(
      `${fmt(p.deliveredScans)} delivered scan${p.deliveredScans === 1 ? '' : 's'}` +
        (p.deliveredScansEarly > 0
          ? ` (${fmt(p.deliveredScansEarly)} of them before the end of their audit period)`
          : ''),
    );
  if (p.deadLetters > 0)
    parts.push(`${fmt(p.deadLetters)} replayed dead letter${p.deadLetters === 1 ? '' : 's'}`);
  return parts.join(', ');
}
