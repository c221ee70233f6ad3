/**
 * The words for the buffer's scan counts, shared by `scan-gateway buffer stats` (src/cli/ops-format.ts)
 * and the health page (src/health/page-cards.ts), so the two say the same things in the same order
 * (docs/cli.md, "Scan counts"). The page ships these functions' source to the browser
 * (`RENDER_FUNCTIONS`, src/health/page-render.ts): each uses only its arguments and built-ins.
 */

/** What the `delivered` count is, for a label: the rows kept, not all ever delivered. */
export function deliveredMeans(): string {
  return 'delivered scans still in the buffer (the audit trail)';
}

/**
 * `pending 4, delivered 339, replayed 25`: the counts by state in the order a scan goes
 * (pending, batched, delivered, failed, held, replayed), any other state after them; `none` when empty. Counts with thousands separators when `fmt` says so.
 */
export function scanCountsText(
  counts: Readonly<Record<string, number>>,
  fmt: (n: number) => string = String,
): string {
  // The way a scan goes, then the dead letters replaced. Inside the function, not a module
  // constant: the health page ships this function's source (src/health/page-render.ts).
  const order = ['pending', 'batched', 'delivered', 'failed', 'held', 'replayed'];
  const known = order.filter((k) => counts[k] !== undefined);
  const others = Object.keys(counts)
    .filter((k) => !order.includes(k))
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
