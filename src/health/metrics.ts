import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { registerBufferMetrics, statusGauge } from './metrics-buffer.js';
import { registerHaMetrics } from './metrics-ha.js';
import type { GatewayStatus } from './status.js';
import type { ListenerTlsStatus } from '../listener/listener-tls.js';
import { findInputKind } from '../inputs/registry.js';

export { instrumentDeliveryApi, upstreamErrorKind } from './metrics-upstream.js';

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
    ) => statusGauge(r, snap, name, help, value);
    registerBufferMetrics(r, snap);
    registerHaMetrics(r, snap);
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
