import type { ProductModelKeyAndName, ScanStatus } from '@scan-gateway/contract';

/**
 * Human-readable renderings of upstream answers, for the CLI (and anything else that shows them
 * to people). Each returns whole lines ending in a newline.
 */

/** Most failures listed by {@link formatStatus}; the rest are counted. */
export const MAX_LISTED_FAILURES = 20;

/** A two-column table of products, or `No products.`. */
export function formatProducts(list: readonly ProductModelKeyAndName[]): string {
  if (list.length === 0) return 'No products.\n';
  const width = Math.max(3, ...list.map((p) => p.key.length));
  const lines = [
    `${'KEY'.padEnd(width)}  NAME`,
    ...list.map((p) => `${p.key.padEnd(width)}  ${p.name}`),
  ];
  return `${lines.join('\n')}\n(${list.length} product${list.length === 1 ? '' : 's'})\n`;
}

/** `Request 123: HasFailures (description)`, the counts, and one line per failed scan. */
export function formatStatus(status: ScanStatus): string {
  const lines = [
    `Request ${status.requestId}: ${status.state}${status.description ? ` (${status.description})` : ''}`,
  ];
  if (status.state !== 'NotFound') {
    lines.push(
      `  processed ${status.processed}${status.failed !== undefined ? `, failed ${status.failed}` : ''}`,
    );
  }
  const failures = status.failures ?? [];
  for (const f of failures.slice(0, MAX_LISTED_FAILURES))
    lines.push(`  ${f.reference || '(no reference)'}: ${f.reason}`);
  if (failures.length > MAX_LISTED_FAILURES)
    lines.push(`  … and ${failures.length - MAX_LISTED_FAILURES} more (use --json for all)`);
  return `${lines.join('\n')}\n`;
}

/** 1536 → `1.5 KiB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(2)} MiB`;
}
