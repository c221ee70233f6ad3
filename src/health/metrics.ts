import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { HaStatusView } from './page-ha.js';
import type { DeliveryApi } from '../delivery/types.js';
import { ErrorCodes, httpStatusOf, isGatewayError } from '../errors.js';
import type { GatewayStatus } from './status.js';
import type { ListenerTlsStatus } from '../listener/listener-tls.js';
import { findInputKind } from '../inputs/registry.js';

/** Where the metrics read their values at each scrape. */
export interface MetricsSources {
  /** The gateway's status (inputs, buffer, delivery); undefined before the app started. */
  status: () => GatewayStatus | undefined;
  /** Batches in the buffer by mode and state (src/queries/ops-reports.ts `batchCounts`). */
  batchCounts: () => { mode: string; state: string; count: number }[];
  /** Tokens obtained from the token endpoint since start. */
  tokenRefreshes?: () => number;
  /** Containers kept in the buffer by name and state (src/buffer/containers.ts `countsByState`). */
  containerCounts?: () => { container: string; state: string; n: number }[];
}

/** Read outcomes as counted by the intake, with their label value (the buffer's `reads.outcome`). */
const OUTCOMES = [
  ['scans', 'scan'],
  ['noReads', 'noRead'],
  ['rejections', 'rejected'],
  ['duplicates', 'duplicate'],
] as const;

/** Upload durations: from a fast LAN answer to a slow pre-signed PUT of tens of MiB, in seconds. */
const UPLOAD_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/**
 * The gateway's Prometheus metrics (prom-client, text format at `GET /metrics`), in a registry of
 * its own (no global state): reads by input and outcome, pending scans, oldest pending age,
 * buffer bytes, batches by mode and state, upload durations, upstream errors by kind, circuit
 * state, token refreshes, and the standard process and Node.js metrics. Gauges and the read
 * counters are computed from one status snapshot per scrape; upload durations and upstream errors
 * are recorded as they happen through {@link instrumentDeliveryApi}.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  /** Time of one upload exchange (direct POST, or the pre-signed PUT), by mode and outcome (`ok`, `error`). */
  readonly uploadDuration: Histogram<'mode' | 'outcome'>;
  /** Failed upstream calls by operation and kind (`network`, `http_5xx`, `rate_limited`, `auth`…). */
  readonly upstreamErrors: Counter<'operation' | 'kind'>;
  private snapshot: GatewayStatus | undefined;

  constructor(private readonly sources: MetricsSources) {
    const r = this.registry;
    // The event-loop monitor samples every 10 ms by default: 100 wake-ups a second on an idle gateway.
    collectDefaultMetrics({ register: r, eventLoopMonitoringPrecision: 100 });
    const snap = () => this.snapshot;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- prom-client calls collect() with the metric as `this`
    const this_ = this;

    new Gauge({
      name: 'scan_gateway_info',
      help: 'Always 1; the labels say which version runs at which site.',
      labelNames: ['version', 'site'],
      registers: [r],
      collect() {
        this.reset();
        const s = snap();
        if (s) this.set({ version: s.version, site: s.site.id }, 1);
      },
    });
    new Gauge({
      name: 'scan_gateway_health_state',
      help: 'Overall state: 1 for the current one of ok, degraded, down.',
      labelNames: ['state'],
      registers: [r],
      collect() {
        const s = snap();
        for (const state of ['ok', 'degraded', 'down'])
          this.set({ state }, s?.state === state ? 1 : 0);
      },
    });
    new Counter({
      name: 'scan_gateway_reads_total',
      help: 'Reads committed to the buffer since start, by input and outcome (scan, noRead, rejected, duplicate).',
      labelNames: ['input', 'outcome'],
      registers: [r],
      collect() {
        this.reset();
        for (const i of snap()?.inputs ?? []) {
          for (const [field, outcome] of OUTCOMES)
            this.inc({ input: i.id, outcome }, i.counters?.[field] ?? 0);
        }
      },
    });
    new Counter({
      name: 'scan_gateway_mqtt_redelivered_total',
      help: 'MQTT messages the broker sent again that were committed before (a crash or lost connection between commit and PUBACK): acknowledged, not stored again; since start, by input.',
      labelNames: ['input'],
      registers: [r],
      collect() {
        this.reset();
        for (const i of snap()?.inputs ?? [])
          if (findInputKind(i.type)?.redelivers === true)
            this.inc({ input: i.id }, i.counters?.redelivered ?? 0);
      },
    });
    new Counter({
      name: 'scan_gateway_read_bytes_total',
      help: 'Bytes of reads committed since start, by input.',
      labelNames: ['input'],
      registers: [r],
      collect() {
        this.reset();
        for (const i of snap()?.inputs ?? []) this.inc({ input: i.id }, i.counters?.bytes ?? 0);
      },
    });
    new Gauge({
      name: 'scan_gateway_input_up',
      help: '1 when the input is up (connected, watching; a TCP server input: a reader connected) or paused on purpose (back-pressure, operator), else 0.',
      labelNames: ['input', 'type'],
      registers: [r],
      collect() {
        this.reset();
        // Paused is deliberate and resumes by itself: an alert on input_up == 0 is for inputs that are down.
        for (const i of snap()?.inputs ?? [])
          this.set({ input: i.id, type: i.type }, i.state === 'up' || i.state === 'paused' ? 1 : 0);
      },
    });
    new Gauge({
      name: 'scan_gateway_input_readers',
      help: 'Readers connected now to an input that listens for them (TCP in server mode).',
      labelNames: ['input'],
      registers: [r],
      collect() {
        this.reset();
        for (const i of snap()?.inputs ?? [])
          if (i.readers) this.set({ input: i.id }, i.readers.count);
      },
    });
    const bufferGauge = (
      name: string,
      help: string,
      value: (s: GatewayStatus) => number | null | undefined,
    ) =>
      new Gauge({
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
    bufferGauge(
      'scan_gateway_delivery_paused',
      '1 while delivery is paused by an operator.',
      (s) => (s.delivery.paused ? 1 : 0),
    );
    bufferGauge(
      'scan_gateway_possible_duplicates',
      "Scans that may be held twice by the service: in batches sent again after an upload's answer was lost, whose status from the service is not known yet (falls back to 0 once it is).",
      (s) => s.delivery.possibleDuplicates ?? 0,
    );
    // High availability (`ha`): labelled by node and leader key (one key per pair), so a gateway
    // without `ha` has no samples of them and an alert over a pair groups by key.
    const haSample = (value: (ha: HaStatusView) => number | undefined) => {
      const ha = snap()?.ha as HaStatusView | undefined;
      const v = ha ? value(ha) : undefined;
      return ha && v !== undefined
        ? { labels: { node: ha.nodeId, key: ha.key }, value: v }
        : undefined;
    };
    const haGauge = (name: string, help: string, value: (ha: HaStatusView) => number | undefined) =>
      new Gauge({
        name,
        help,
        labelNames: ['node', 'key'],
        registers: [r],
        collect() {
          this.reset();
          const sample = haSample(value);
          if (sample) this.set(sample.labels, sample.value);
        },
      });
    haGauge(
      'scan_gateway_ha_leader',
      'High availability: 1 while this node leads (takes reads), 0 as standby or fenced.',
      (ha) => (ha.role === 'leader' ? 1 : 0),
    );
    haGauge(
      'scan_gateway_ha_epoch',
      'High availability: the leader epoch (etcd revision of the leader key) this node leads under, or last saw.',
      (ha) => ha.epoch,
    );
    // Counts exposed as Prometheus counters, so increase() and rate() read them as counts.
    const haCounter = (name: string, help: string, value: (ha: HaStatusView) => number) =>
      new Counter({
        name,
        help,
        labelNames: ['node', 'key'],
        registers: [r],
        collect() {
          this.reset();
          const sample = haSample(value);
          if (sample) this.inc(sample.labels, sample.value);
        },
      });
    haCounter(
      'scan_gateway_ha_takeovers_total',
      'High availability: takeovers by this node since it started.',
      (ha) => ha.takeovers,
    );
    haGauge(
      'scan_gateway_ha_last_takeover_seconds',
      "High availability: how long this node's last takeover took, from the lease lapse seen to its inputs started, in seconds.",
      (ha) => (ha.lastTakeover ? ha.lastTakeover.tookMs / 1000 : undefined),
    );
    haGauge(
      'scan_gateway_ha_etcd_reachable',
      'High availability: 1 when the last request to etcd was answered.',
      (ha) => (ha.etcd.reachable ? 1 : 0),
    );
    haGauge(
      'scan_gateway_ha_lease_renewal_age_seconds',
      'High availability: age of the last successful lease renewal (leader) or look at the leader key (standby), in seconds.',
      (ha) =>
        ha.lease.lastRenewalAgeMs === undefined ? undefined : ha.lease.lastRenewalAgeMs / 1000,
    );
    haCounter(
      'scan_gateway_ha_possible_duplicates_total',
      'High availability: reads stored as possible duplicates, sent again by the broker after a takeover (lifetime, kept in the buffer).',
      (ha) => ha.possibleDuplicates.reads,
    );
    bufferGauge(
      'scan_gateway_uptime_seconds',
      'Seconds since the gateway started.',
      (s) => s.uptimeSec,
    );
    // Prometheus convention for "when did X last succeed": alert on `time() - … > 900`. prom-client shows an unset unlabelled gauge as 0, so a buffer that never delivered reads 0 (a large age), not absent.
    bufferGauge(
      'scan_gateway_last_upload_success_timestamp_seconds',
      'Time of the last successful upload (a batch accepted by the service), in seconds since the Unix epoch; 0 on a buffer that has never delivered.',
      (s) => (s.delivery.lastSuccessAt ? Date.parse(s.delivery.lastSuccessAt) / 1000 : undefined),
    );
    bufferGauge(
      'scan_gateway_held_scans',
      'Scans of batches the service refused as a whole, kept and not delivered.',
      (s) => s.buffer.heldScans ?? s.buffer.scans.held ?? 0,
    );
    new Gauge({
      name: 'scan_gateway_health_problems',
      help: 'Problems health found now, by code (docs/errors.md) and severity (down, degraded, info): how many of each.',
      labelNames: ['code', 'severity'],
      registers: [r],
      collect() {
        this.reset();
        const seen = new Map<string, { code: string; severity: string; n: number }>();
        for (const p of snap()?.healthProblems ?? []) {
          const k = `${p.code} ${p.severity}`;
          const e = seen.get(k) ?? { code: p.code, severity: p.severity, n: 0 };
          e.n++;
          seen.set(k, e);
        }
        for (const e of seen.values()) this.set({ code: e.code, severity: e.severity }, e.n);
      },
    });
    new Gauge({
      name: 'scan_gateway_scans',
      help: 'Scans in the buffer by state (pending, batched, delivered, failed, held).',
      labelNames: ['state'],
      registers: [r],
      collect() {
        this.reset();
        for (const [state, n] of Object.entries(snap()?.buffer.scans ?? {})) this.set({ state }, n);
      },
    });
    new Gauge({
      name: 'scan_gateway_batches',
      help: "Batches in the buffer by mode and state; finished batches by the service's final state (Success, HasFailures, Failed).",
      labelNames: ['mode', 'state'],
      registers: [r],
      collect() {
        this.reset();
        if (!snap()) return;
        for (const b of this_.sources.batchCounts())
          this.set({ mode: b.mode, state: b.state }, b.count);
      },
    });
    new Gauge({
      name: 'scan_gateway_containers',
      help: 'Containers kept in the buffer (open ones, and closed ones for the audit period) by container name and state: open, complete, incomplete (closed short of its members), closed (no fixed count), abandoned.',
      labelNames: ['container', 'state'],
      registers: [r],
      collect() {
        this.reset();
        if (!snap()) return;
        for (const c of this_.sources.containerCounts?.() ?? [])
          this.set({ container: c.container, state: c.state }, c.n);
      },
    });
    new Gauge({
      name: 'scan_gateway_delivery_circuit_state',
      help: 'Delivery circuit: 1 for the current one of closed, open, half-open.',
      labelNames: ['state'],
      registers: [r],
      collect() {
        const circuit = snap()?.delivery.circuit;
        for (const state of ['closed', 'open', 'half-open'])
          this.set({ state }, circuit === state ? 1 : 0);
      },
    });
    new Counter({
      name: 'scan_gateway_status_events_total',
      help: 'Status events read from the topic since start, by outcome: applied (moved one of our batches), duplicate (ours, changed nothing), ignored (not our requestId), invalid (not a status object).',
      labelNames: ['outcome'],
      registers: [r],
      collect() {
        this.reset();
        const e = snap()?.statusEvents;
        if (!e) return;
        for (const outcome of ['applied', 'duplicates', 'ignored', 'invalid'] as const)
          this.inc({ outcome: outcome === 'duplicates' ? 'duplicate' : outcome }, e[outcome]);
      },
    });
    new Counter({
      name: 'scan_gateway_status_events_received_total',
      help: 'Status events read from the topic since start, whatever became of them.',
      registers: [r],
      collect() {
        this.reset();
        const e = snap()?.statusEvents;
        if (e) this.inc(e.received);
      },
    });
    bufferGauge(
      'scan_gateway_status_events_lag',
      'Status events between the consumer and the end of the topic at its last read (all partitions).',
      (s) => s.statusEvents?.lag,
    );
    bufferGauge(
      'scan_gateway_status_events_up',
      '1 while status events flow (polling at the safety interval), else 0 (polling at its normal pace, or events off).',
      (s) => (s.statusEvents ? (s.statusEvents.state === 'flowing' ? 1 : 0) : undefined),
    );
    bufferGauge(
      'scan_gateway_status_events_last_event_age_seconds',
      'Seconds since the last status event was read; 0 before the first.',
      (s) =>
        s.statusEvents?.lastEventAt && s.generatedAt
          ? Math.max(0, (Date.parse(s.generatedAt) - Date.parse(s.statusEvents.lastEventAt)) / 1000)
          : undefined,
    );
    new Counter({
      name: 'scan_gateway_token_refreshes_total',
      help: 'Access tokens obtained from the token endpoint since start.',
      registers: [r],
      collect() {
        this.reset();
        this.inc(this_.sources.tokenRefreshes?.() ?? 0);
      },
    });
    this.uploadDuration = new Histogram({
      name: 'scan_gateway_upload_duration_seconds',
      help: 'Duration of one upload exchange (direct POST or pre-signed PUT), by mode and outcome.',
      labelNames: ['mode', 'outcome'],
      buckets: UPLOAD_BUCKETS,
      registers: [r],
    });
    this.upstreamErrors = new Counter({
      name: 'scan_gateway_upstream_errors_total',
      help: 'Failed calls to the upstream service, by operation and kind (network, timeout, rate_limited, http_4xx, http_5xx, auth, response, too_large, presigned_refused, other).',
      labelNames: ['operation', 'kind'],
      registers: [r],
    });
  }

  /** The metrics in the Prometheus text format, from one fresh status snapshot. */
  async text(): Promise<string> {
    this.snapshot = this.sources.status();
    try {
      return await this.registry.metrics();
    } finally {
      this.snapshot = undefined;
    }
  }

  /** Content type of {@link text}. */
  get contentType(): string {
    return this.registry.contentType;
  }
}

/**
 * The local server's certificate metrics, registered by the server only when it serves HTTPS
 * (`http.tls`), so a plain listener has none (an unlabelled gauge would otherwise read 0, an end
 * long past): the end of the served certificate and the reloads by outcome.
 */
export function registerListenerTlsMetrics(
  registry: Registry,
  tls: () => ListenerTlsStatus | undefined,
): void {
  if (registry.getSingleMetric('scan_gateway_http_tls_cert_expiry_seconds')) return;
  new Gauge({
    name: 'scan_gateway_http_tls_cert_expiry_seconds',
    help: "End of the local server's TLS certificate (notAfter), in seconds since the epoch.",
    registers: [registry],
    collect() {
      const end = tls()?.certificate.validTo;
      if (end) this.set(Date.parse(end) / 1000);
    },
  });
  new Counter({
    name: 'scan_gateway_http_tls_reloads_total',
    help: "Reloads of the local server's TLS files since start that found them changed, by outcome: applied (served from then on) or refused (the served certificate stayed).",
    labelNames: ['outcome'],
    registers: [registry],
    collect() {
      this.reset();
      const reloads = tls()?.reloads;
      this.inc({ outcome: 'applied' }, reloads?.applied ?? 0);
      this.inc({ outcome: 'refused' }, reloads?.refused ?? 0);
    },
  });
}

/** The kind label of an upstream failure. */
export function upstreamErrorKind(err: unknown): string {
  if (!isGatewayError(err)) return 'other';
  switch (err.code) {
    case ErrorCodes.UPSTREAM_NETWORK:
      return 'network';
    case ErrorCodes.UPSTREAM_AUTH:
      return 'auth';
    case ErrorCodes.UPSTREAM_RESPONSE:
      return 'response';
    case ErrorCodes.BODY_TOO_LARGE:
      return 'too_large';
    case ErrorCodes.PRESIGNED_REFUSED:
      return 'presigned_refused';
    case ErrorCodes.UPSTREAM_HTTP: {
      const status = Number(httpStatusOf(err));
      if (status === 408) return 'timeout';
      if (status === 429) return 'rate_limited';
      if (status === 413) return 'too_large';
      return status >= 500 ? 'http_5xx' : 'http_4xx';
    }
    default:
      return 'other';
  }
}

/** Calls whose time is an upload, by mode. */
const UPLOAD_MODE: Record<string, string> = {
  uploadScans: 'direct',
  putPresigned: 'presigned',
  putPresignedStream: 'presigned',
};
const OPERATIONS = new Set([
  'uploadScans',
  'requestPresignedUpload',
  'putPresigned',
  'putPresignedStream',
  'getScanStatus',
]);

/**
 * The delivery API with metrics: the time of each upload (`uploadScans`, `putPresigned`) goes to
 * the upload histogram, and every failed call of delivery's four operations to the upstream error
 * counter. Other members pass through untouched, so the wrapper keeps working when the API grows.
 */
export function instrumentDeliveryApi<T extends DeliveryApi>(api: T, metrics: GatewayMetrics): T {
  return new Proxy(api, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof prop !== 'string' || !OPERATIONS.has(prop) || typeof value !== 'function')
        return value;
      const mode = UPLOAD_MODE[prop];
      return async (...args: unknown[]) => {
        const end = mode ? metrics.uploadDuration.startTimer({ mode }) : undefined;
        try {
          const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(
            target,
            args,
          );
          end?.({ outcome: 'ok' });
          return result;
        } catch (err) {
          end?.({ outcome: 'error' });
          // A streamed PUT is the same operation as before it was streamed.
          metrics.upstreamErrors.inc({
            operation: prop === 'putPresignedStream' ? 'putPresigned' : prop,
            kind: upstreamErrorKind(err),
          });
          throw err;
        }
      };
    },
  });
}
