import { Counter, Gauge, type Registry } from 'prom-client';
import type { GatewayStatus } from './status.js';

/**
 * The buffer's metrics (src/health/metrics.ts), each read from the status snapshot of the scrape:
 * scans waiting and undelivered, bytes and quota, early pruning and the disk's runway, and the
 * pauses of intake and delivery beside them. {@link statusGauge} is the one shape of them all.
 */

/** The status snapshot of the scrape in progress; undefined outside a scrape or before start. */
export type StatusSnapshot = () => GatewayStatus | undefined;

/**
 * An unlabelled gauge of one number of the status snapshot: unset (absent, or 0 for prom-client's
 * unlabelled gauges) when there is no snapshot or `value` gives `undefined` or `null`.
 */
export function statusGauge(
  r: Registry,
  snap: StatusSnapshot,
  name: string,
  help: string,
  value: (s: GatewayStatus) => number | null | undefined,
): Gauge {
  return new Gauge({
    name,
    help,
    registers: [r],
    collect() {
      this.reset();
      const s = snap();
      const v = s ? value(s) : undefined;
      if (v !== undefined && v !== null) this.set(v);
    },
  });
}

/** Registers the buffer's metrics in `r`, in the order the text shows them. */
export function registerBufferMetrics(r: Registry, snap: StatusSnapshot): void {
  const bufferGauge = (
    name: string,
    help: string,
    value: (s: GatewayStatus) => number | null | undefined,
  ) => statusGauge(r, snap, name, help, value);
  bufferGauge(
    'scan_gateway_pending_scans',
    'Scans in the buffer not yet in a batch.',
    (s) => s.buffer.pendingScans,
  );
  bufferGauge(
    'scan_gateway_undelivered_scans',
    'Scans not yet delivered: pending, or in a batch the service has not finished.',
    (s) => s.buffer.undeliveredScans,
  );
  bufferGauge(
    'scan_gateway_oldest_pending_age_seconds',
    'Age of the oldest scan not yet delivered (waiting, or in a batch the service has not finished), in seconds; 0 when none.',
    (s) => (s.buffer.oldestPendingAgeMs === null ? 0 : s.buffer.oldestPendingAgeMs / 1000),
  );
  bufferGauge(
    'scan_gateway_buffer_bytes',
    'Bytes of the SQLite buffer on disk (database, write-ahead log, index).',
    (s) => s.buffer.fileBytes,
  );
  bufferGauge(
    'scan_gateway_buffer_quota_bytes',
    'Quota on undelivered data, in bytes, when configured.',
    (s) => s.buffer.quotaBytes,
  );
  new Counter({
    name: 'scan_gateway_buffer_pruned_early_scans_total',
    help: 'Delivered scans pruned before the end of their audit period because the buffer disk ran low, since start.',
    registers: [r],
    collect() {
      this.reset();
      this.inc(snap()?.buffer.disk?.prunedEarlyScans ?? 0);
    },
  });
  bufferGauge(
    'scan_gateway_buffer_audit_lost_scans',
    'Delivered scans pruned early within the last audit period (buffer.retentionDays), remembered across restarts; 0 when none.',
    (s) => (s.buffer.disk ? (s.buffer.disk.auditLost?.scans ?? 0) : undefined),
  );
  bufferGauge(
    'scan_gateway_buffer_audit_lost_span_seconds',
    'Span of the read times of the delivered scans pruned early within the last audit period, in seconds; 0 when none.',
    (s) => {
      const lost = s.buffer.disk?.auditLost;
      if (!s.buffer.disk) return undefined;
      if (!lost?.firstReadAt || !lost.lastReadAt) return 0;
      return (Date.parse(lost.lastReadAt) - Date.parse(lost.firstReadAt)) / 1000;
    },
  );
  bufferGauge(
    'scan_gateway_buffer_prune_cannot_help',
    '1 while the buffer disk is low and pruning delivered scans cannot free the shortfall (nothing is pruned).',
    (s) => (s.buffer.disk ? (s.buffer.disk.pruneCannotHelp ? 1 : 0) : undefined),
  );
  // NaN while there is no estimate: an unlabelled gauge left unset reads 0, which would say the
  // disk is full now; NaN fails every comparison of an alert rule.
  bufferGauge(
    'scan_gateway_buffer_disk_runway_days',
    "Days the buffer disk's free space (above the mark where the audit yields) lasts at the last day's rate of scans if none were delivered from now on; NaN in the first 10 minutes, while no scans are written, and for a buffer in memory.",
    (s) => s.buffer.disk?.runway?.days ?? NaN,
  );
  bufferGauge('scan_gateway_intake_paused', '1 while intake is paused by back-pressure.', (s) =>
    s.buffer.intakePaused ? 1 : 0,
  );
  bufferGauge('scan_gateway_delivery_paused', '1 while delivery is paused by an operator.', (s) =>
    s.delivery.paused ? 1 : 0,
  );
  bufferGauge(
    'scan_gateway_possible_duplicates',
    "Scans that may be held twice by the service: in batches sent again after an upload's answer was lost, whose status from the service is not known yet (falls back to 0 once it is).",
    (s) => s.delivery.possibleDuplicates ?? 0,
  );
}
