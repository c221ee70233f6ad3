import { originWords } from '../format/origin.js';
import type { FailuresReport, QueueReport, StatsReport } from '../queries/ops-reports.js';
import { printableRaw } from '../format/printable.js';
import { fmtBytes, fmtDuration, fmtTime } from '../health/page-render.js';
import { deliveredMeans, prunedText, scanCountsText } from '../format/scan-counts.js';

/**
 * The human output of `queue`, `failures` and `buffer stats`: plain text tables, times in the
 * site's zone. The reports come made printable (src/format/printable.ts) by the caller.
 */

/** Left-aligned text columns, right-aligned numbers, two spaces apart. */
function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => String(c)))];
  const numeric = headers.map(
    (_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number'),
  );
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => [...(r[i] ?? '')].length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `queue`: totals, by DCP, by age, and the batches not finished. */
export function formatQueue(r: QueueReport, timezone: string, nowMs: number): string {
  const lines: string[] = [];
  const { waiting, inFlight, oldestAgeMs } = r.totals;
  lines.push(
    waiting + inFlight === 0
      ? 'Nothing waiting: every scan in the buffer is delivered.'
      : `${waiting + inFlight} scans waiting for delivery (${waiting} not yet in a batch, ${inFlight} in batches not finished); oldest ${fmtDuration(oldestAgeMs)}.`,
  );
  if (r.byDcp.length > 0) {
    lines.push(
      '',
      'By DCP:',
      table(
        ['DCP', 'not in a batch', 'in a batch', 'oldest'],
        r.byDcp.map((d) => [d.dcp, d.waiting, d.inFlight, fmtDuration(d.oldestAgeMs)]),
      ),
    );
    lines.push(
      '',
      'By age:',
      table(
        ['age', 'scans'],
        r.byAge.map((b) => [b.label, b.scans]),
      ),
    );
  }
  if (r.batches.length > 0) {
    lines.push(
      '',
      'Batches not finished:',
      table(
        [
          'batch',
          'mode',
          'state',
          'scans',
          'bytes',
          'request id',
          'tries',
          'next try',
          'last error',
        ],
        r.batches.map((b) => [
          b.id,
          b.mode,
          b.state,
          b.scans,
          fmtBytes(b.bytes),
          b.requestId ?? '-',
          b.attempts,
          b.state === 'held'
            ? 'held (see failures)'
            : b.nextAttemptAt <= nowMs
              ? 'now'
              : `in ${fmtDuration(b.nextAttemptAt - nowMs)}`,
          (b.lastError ?? '').slice(0, 80),
        ]),
      ),
    );
  }
  lines.push('', `Times in ${timezone}.`);
  return `${lines.join('\n')}\n`;
}

/** `failures`: counts by reason, then the latest with reason and raw read. */
export function formatFailures(r: FailuresReport, timezone: string, batchId?: number): string {
  if (r.latest.length === 0)
    return batchId === undefined
      ? 'No failed scans and no rejected reads in the buffer.\n'
      : `No failed or held scans of batch ${batchId} in the buffer (replayed ones are not listed).\n`;
  const lines = [
    'By reason:',
    table(
      ['kind', 'count', 'reason'],
      r.reasons.map((x) => [x.kind, x.count, x.reason]),
    ),
    '',
    `Latest (times in ${timezone}):`,
  ];
  for (const f of r.latest) {
    lines.push(
      `${fmtTime(f.at, timezone)}  ${f.kind.padEnd(8)}  input ${f.inputId}${f.dcp ? `  DCP ${f.dcp}` : ''}${f.product !== null ? `  product ${printableRaw(f.product)}` : ''}${f.requestId ? `  request ${f.requestId}` : ''}`,
      `    reason: ${f.reason}`,
      `    read:   ${f.raw}${f.origin ? `   (${originWords(f.origin)})` : ''}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** `buffer stats`: files on disk, pages, the rows by state in the status's words, and what pruning removed. */
export function formatStats(r: StatsReport): string {
  const counts = (o: Record<string, number>) =>
    Object.keys(o).length === 0
      ? 'none'
      : Object.entries(o)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ');
  return `${[
    `Buffer ${r.path}`,
    `  on disk:   ${fmtBytes(r.files.total)} (database ${fmtBytes(r.files.db)}, write-ahead log ${fmtBytes(r.files.wal)}, index ${fmtBytes(r.files.shm)})`,
    `  pages:     ${r.pages} of ${fmtBytes(r.pageSize)}, ${r.freePages} free; journal ${r.journalMode}; schema version ${r.schemaVersion}`,
    `  reads:     ${counts(r.reads)}`,
    `  scans:     ${scanCountsText(r.scans)} (in the buffer now; delivered: ${deliveredMeans()})`,
    `  pruned:    ${prunedText(r.pruned)} (removed from the buffer, lifetime)`,
    ...(r.statusScans
      ? [
          `  WARNING:   the status counts scans otherwise (${scanCountsText(r.statusScans)}): its counts, kept by triggers, no longer match the rows; please report this`,
        ]
      : []),
    `  batches:   ${counts(r.batches)}`,
    `  reads from ${r.oldestReadAt ?? '-'} to ${r.newestReadAt ?? '-'} (UTC)`,
  ].join('\n')}\n`;
}
