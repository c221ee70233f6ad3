import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sqlOf } from '../test/helpers/buffer-sql.js';
import { BufferStore } from '../src/buffer/store.js';
import { HEALTH_THRESHOLDS } from '../src/health/derive.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import { median, nowMs } from './lib/system.js';
import { queriesOf } from '../test/helpers/queries.js';

export interface StatusBenchOptions {
  /** Scans in the buffer: 1 % failed, the rest delivered, in batches of `batchScans`. */
  scans: number;
  batchScans: number;
  /** Rejected reads besides the scans. */
  rejected: number;
  /** Status reads timed; the median is reported. */
  calls: number;
}

/** "Now" for the health rules' window: just after the fill's instant, so the whole buffer is the last hour. */
const WINDOW_NOW = Date.parse('2026-11-01T00:30:00.000Z');
/** "Now" a month after the fill: the last hour holds none of it. */
const MONTH_LATER = Date.parse('2026-12-01T00:00:00.000Z');

export const STATUS_DEFAULTS: StatusBenchOptions = {
  scans: 1_000_000,
  batchScans: 100,
  rejected: 10_000,
  calls: 50,
};

/**
 * Fills a buffer the way a month of audit at a busy line leaves it, with plain SQL (the rows are
 * what intake and delivery write; the triggers of the schema run as they would).
 */
export function fillBuffer(store: BufferStore, opts: StatusBenchOptions): void {
  const db = sqlOf(store);
  db.transaction(() => {
    db.prepare(
      `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?)
       INSERT INTO batches (id, mode, state, scan_count, bytes, created_at, uploaded_at, finished_at, upstream_state, request_id)
       SELECT x, 'direct', 'done', ?, 0, '2026-11-01T00:00:00.000Z', strftime('%Y-%m-%dT%H:%M:%fZ', '2026-11-01', '+' || x || ' seconds'),
              '2026-11-01T00:00:00.000Z', CASE WHEN x % 100 = 0 THEN 'HasFailures' ELSE 'Success' END, x FROM n`,
    ).run(Math.ceil(opts.scans / opts.batchScans), opts.batchScans);
    db.prepare(
      `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < @total)
       INSERT INTO reads (id, input_id, received_at, raw, outcome, reason)
       SELECT x, 'gi-scanner', '2026-11-01T00:00:00.000Z', randomblob(40), CASE WHEN x > @scans THEN 'rejected' ELSE 'scan' END,
              CASE WHEN x > @scans THEN 'not a GS1 code' END FROM n`,
    ).run({ total: opts.scans + opts.rejected, scans: opts.scans });
    db.prepare(
      `INSERT INTO scan_rows (read_id, dcp_key, reference, time_utc, bytes, created_at, state, batch_id, failure_reason)
       SELECT id, 'GI-01', 'REF-' || id, '2026-11-01T00:00:00.000Z', 30, 0,
              CASE WHEN id % 100 = 0 THEN 'failed' ELSE 'delivered' END, (id - 1) / CAST(? AS INTEGER) + 1,
              CASE WHEN id % 100 = 0 THEN 'Invalid DCP' END
       FROM reads WHERE outcome = 'scan'`,
    ).run(opts.batchScans);
    db.prepare(
      `INSERT INTO scan_bodies (id, body) SELECT id, '{"reference":"' || reference || '"}' FROM scan_rows`,
    ).run();
  })();
}

/** Benchmark 6: what one refresh of the health page reads from a full buffer. */
export async function benchStatus(
  opts: StatusBenchOptions = STATUS_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-status-'));
  try {
    const store = BufferStore.openAt(join(dir, 'buffer.db'));
    try {
      const fillStarted = nowMs();
      fillBuffer(store, opts);
      const fillSec = (nowMs() - fillStarted) / 1000;
      // The buffer reads of app.ts status(), which /healthz, /api/v1/status, the page and /metrics share.
      const refresh = () => {
        store.reports.totals();
        store.reports.scanCounts();
        queriesOf(store).lastUploadAt();
        queriesOf(store).oldestUndeliveredCreatedAt();
        queriesOf(store).recentBatches(20);
        queriesOf(store).recentProblems(20);
        queriesOf(store).batchCounts();
        // The health rules' last hour, as a refresh reads it a month after the fill.
        queriesOf(store).recentActivity(MONTH_LATER - HEALTH_THRESHOLDS.windowMs);
        queriesOf(store).stuckBatches(MONTH_LATER - HEALTH_THRESHOLDS.stuckBatchMs);
      };
      // The same last hour at its worst: every read (10,000 of them rejected) and every finished
      // batch of the buffer fall inside the window (the fill stamps them all at 2026-11-01T00:00Z).
      const busiestHour = () => {
        queriesOf(store).recentActivity(WINDOW_NOW - HEALTH_THRESHOLDS.windowMs);
        queriesOf(store).stuckBatches(WINDOW_NOW - HEALTH_THRESHOLDS.stuckBatchMs);
      };
      // What the counts cost before migration 3: grouping the rows themselves.
      const raw = sqlOf(store);
      const grouped = () => {
        raw.prepare(`SELECT state, count(*) FROM scan_rows GROUP BY state`).all();
        raw
          .prepare(`SELECT mode, state, upstream_state, count(*) FROM batches GROUP BY 1, 2, 3`)
          .all();
      };
      const time = (f: () => void, calls: number) => {
        const ms: number[] = [];
        for (let i = 0; i < calls; i++) {
          const started = nowMs();
          f();
          ms.push(nowMs() - started);
        }
        return { median: median(ms), max: Math.max(...ms) };
      };
      refresh();
      const status = time(refresh, opts.calls);
      const group = time(grouped, Math.max(3, Math.round(opts.calls / 10)));
      busiestHour();
      const hour = time(busiestHour, Math.max(3, Math.round(opts.calls / 5)));
      const counts = store.reports.scanCounts();
      const figures: Figure[] = [
        judge({
          name: `status read at ${Math.round(opts.scans / 1000)}k scans`,
          value: status.median,
          unit: 'ms',
          ceiling: {
            value: group.median,
            what: 'GROUP BY of the scans and batches themselves (what the counts cost before migration 3)',
          },
          // A refresh must not hold the event loop longer than a good share of the MQTT p99 budget (20 ms).
          targets: [{ kind: 'max', of: 'value', value: 5 }],
          note: `median of ${opts.calls} reads; the largest took ${status.max.toFixed(2)} ms`,
        }),
        judge({
          name: `health rules' last hour, all ${Math.round((opts.scans + opts.rejected) / 1000)}k reads in it`,
          value: hour.median,
          unit: 'ms',
          // The whole MQTT p99 budget: a worst case far beyond a line's hour must still not stall intake.
          targets: [{ kind: 'max', of: 'value', value: 20 }],
          note: `median of ${Math.max(3, Math.round(opts.calls / 5))} reads; the largest took ${hour.max.toFixed(2)} ms; ${opts.rejected} rejections and ${Math.ceil(opts.scans / opts.batchScans)} finished batches in the window`,
        }),
      ];
      return {
        id: 'status',
        title: 'Health refresh on a full buffer',
        figures,
        notes: [
          `buffer: ${counts.delivered ?? 0} delivered and ${counts.failed ?? 0} failed scans in ${Math.ceil(opts.scans / opts.batchScans)} batches, ${opts.rejected} rejected reads; filled in ${fillSec.toFixed(1)} s`,
          `reads: totals, scanCounts, lastUploadAt, oldestUndeliveredCreatedAt, recentBatches(20), recentProblems(20), batchCounts, recentActivity and stuckBatches (a month after the fill)`,
        ],
      };
    } finally {
      store.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
