import { describe, expect, it } from 'vitest';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import {
  GatewayMetrics,
  instrumentDeliveryApi,
  upstreamErrorKind,
} from '../../src/health/metrics.js';
import type { GatewayStatus } from '../../src/health/status.js';
import type { DeliveryApi } from '../../src/delivery/types.js';
import { parsePrometheusText, type Family } from './metrics-text-parser.js';

function status(): GatewayStatus {
  return {
    state: 'degraded',
    reasons: ['input b is down'],
    site: { id: 'hall-3', timezone: 'Europe/Berlin' },
    version: '1.2.3',
    startedAt: '2026-11-18T05:00:00.000Z',
    uptimeSec: 42,
    config: { file: 'c.yaml', loadedAt: '2026-11-18T05:00:00.000Z' },
    buffer: {
      path: 'b.db',
      pendingScans: 4,
      undeliveredScans: 9,
      oldestPendingAgeMs: 2500,
      scans: { pending: 4, batched: 5, delivered: 20 },
      fileBytes: 4096,
    },
    delivery: { circuit: 'half-open', paused: true, possibleDuplicates: 1 },
    inputs: [
      {
        id: 'a',
        type: 'serial',
        state: 'up',
        counters: { reads: 12, scans: 9, noReads: 1, rejections: 1, duplicates: 1, bytes: 300 },
      },
      {
        id: 'b "quoted"\\',
        type: 'files',
        state: 'down',
        counters: { reads: 0, scans: 0, noReads: 0, rejections: 2, duplicates: 0, bytes: 10 },
      },
      {
        id: 'broker',
        type: 'mqtt',
        state: 'up',
        counters: {
          reads: 5,
          scans: 5,
          noReads: 0,
          rejections: 0,
          duplicates: 0,
          redelivered: 3,
          bytes: 50,
        },
      },
    ],
    batches: [],
    problems: [],
  };
}

const value = (families: Map<string, Family>, name: string, labels: Record<string, string> = {}) =>
  families
    .get(name.replace(/_(bucket|sum|count)$/, ''))
    ?.samples.find(
      (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
    )?.value ??
  families
    .get(name)
    ?.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;

describe('metrics', () => {
  it('carries every series, in a format a strict parser accepts', async () => {
    const metrics = new GatewayMetrics({
      status,
      batchCounts: () => [
        { mode: 'direct', state: 'Success', count: 3 },
        { mode: 'presigned', state: 'uploaded', count: 1 },
      ],
      tokenRefreshes: () => 2,
    });
    const fake: DeliveryApi = {
      uploadScans: async () => ({ requestId: '1' }),
      requestPresignedUpload: async () => {
        throw new GatewayError(ErrorCodes.UPSTREAM_HTTP, 'HTTP 429', { details: { status: 429 } });
      },
      putPresigned: async () => {
        throw new GatewayError(ErrorCodes.UPSTREAM_NETWORK, 'reset');
      },
      getScanStatus: async () => ({ state: 'Success', requestId: '1' }),
    };
    const api = instrumentDeliveryApi(fake, metrics);
    await api.uploadScans('[]');
    await api.uploadScans('[]');
    await expect(api.requestPresignedUpload()).rejects.toThrow('HTTP 429');
    await expect(api.putPresigned('http://x', '[]')).rejects.toThrow('reset');
    await api.getScanStatus('1');

    const text = await metrics.text();
    const f = parsePrometheusText(text);
    expect(value(f, 'scan_gateway_reads_total', { input: 'a', outcome: 'scan' })).toBe(9);
    expect(value(f, 'scan_gateway_reads_total', { input: 'a', outcome: 'noRead' })).toBe(1);
    expect(
      value(f, 'scan_gateway_reads_total', { input: 'b "quoted"\\', outcome: 'rejected' }),
    ).toBe(2);
    expect(f.get('scan_gateway_reads_total')!.type).toBe('counter');
    // Only MQTT inputs have resends to recognise.
    expect(
      f.get('scan_gateway_mqtt_redelivered_total')!.samples.map((x) => [x.labels, x.value]),
    ).toEqual([[{ input: 'broker' }, 3]]);
    expect(value(f, 'scan_gateway_pending_scans')).toBe(4);
    expect(value(f, 'scan_gateway_undelivered_scans')).toBe(9);
    expect(value(f, 'scan_gateway_oldest_pending_age_seconds')).toBe(2.5);
    expect(value(f, 'scan_gateway_buffer_bytes')).toBe(4096);
    expect(value(f, 'scan_gateway_batches', { mode: 'direct', state: 'Success' })).toBe(3);
    expect(value(f, 'scan_gateway_batches', { mode: 'presigned', state: 'uploaded' })).toBe(1);
    expect(
      value(f, 'scan_gateway_upload_duration_seconds_count', { mode: 'direct', outcome: 'ok' }),
    ).toBe(2);
    expect(
      value(f, 'scan_gateway_upload_duration_seconds_count', {
        mode: 'presigned',
        outcome: 'error',
      }),
    ).toBe(1);
    expect(f.get('scan_gateway_upload_duration_seconds')!.type).toBe('histogram');
    expect(
      value(f, 'scan_gateway_upstream_errors_total', {
        operation: 'requestPresignedUpload',
        kind: 'rate_limited',
      }),
    ).toBe(1);
    expect(
      value(f, 'scan_gateway_upstream_errors_total', {
        operation: 'putPresigned',
        kind: 'network',
      }),
    ).toBe(1);
    expect(value(f, 'scan_gateway_delivery_circuit_state', { state: 'half-open' })).toBe(1);
    expect(value(f, 'scan_gateway_delivery_circuit_state', { state: 'closed' })).toBe(0);
    expect(value(f, 'scan_gateway_token_refreshes_total')).toBe(2);
    expect(value(f, 'scan_gateway_health_state', { state: 'degraded' })).toBe(1);
    expect(value(f, 'scan_gateway_input_up', { input: 'a', type: 'serial' })).toBe(1);
    expect(value(f, 'scan_gateway_delivery_paused')).toBe(1);
    expect(value(f, 'scan_gateway_info', { version: '1.2.3', site: 'hall-3' })).toBe(1);
    // process metrics
    expect(value(f, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(f.has('nodejs_eventloop_lag_seconds')).toBe(true);
  });

  it('the instrumented API passes other members through', () => {
    const metrics = new GatewayMetrics({ status: () => undefined, batchCounts: () => [] });
    const api = Object.assign(
      {
        uploadScans: async () => ({ requestId: '1' }),
        requestPresignedUpload: async () => ({ url: 'u', requestId: '2' }),
        putPresigned: async () => {},
        getScanStatus: async () => ({ state: 'x', requestId: '1' }),
      },
      { tokenInfo: () => ({ refreshes: 5 }) },
    );
    expect(instrumentDeliveryApi(api, metrics).tokenInfo()).toEqual({ refreshes: 5 });
  });

  it('before the app started: no per-input series, process metrics', async () => {
    const metrics = new GatewayMetrics({ status: () => undefined, batchCounts: () => [] });
    const f = parsePrometheusText(await metrics.text());
    expect(f.get('scan_gateway_reads_total')!.samples).toEqual([]);
    expect(f.get('scan_gateway_batches')!.samples).toEqual([]);
    expect(value(f, 'process_cpu_seconds_total')).toBeGreaterThanOrEqual(0);
  });

  it('tells upstream error kinds apart', () => {
    const http = (status: number) =>
      new GatewayError(ErrorCodes.UPSTREAM_HTTP, 'x', { details: { status } });
    expect([http(408), http(429), http(413), http(404), http(503)].map(upstreamErrorKind)).toEqual([
      'timeout',
      'rate_limited',
      'too_large',
      'http_4xx',
      'http_5xx',
    ]);
    expect(upstreamErrorKind(new GatewayError(ErrorCodes.UPSTREAM_AUTH, 'x'))).toBe('auth');
    expect(upstreamErrorKind(new Error('x'))).toBe('other');
  });

  it('the parser refuses what Prometheus refuses', () => {
    expect(() => parsePrometheusText('a 1\n')).toThrow('without a TYPE');
    expect(() => parsePrometheusText('# TYPE a gauge\na{x="1} 1\n')).toThrow();
    expect(() => parsePrometheusText('# TYPE a gauge\na{x="\\t"} 1\n')).toThrow('bad label');
    expect(() => parsePrometheusText('# TYPE a gauge\na 1\na 2\n')).toThrow('series twice');
    expect(() => parsePrometheusText('# TYPE a gauge\na one\n')).toThrow('bad value');
    expect(() => parsePrometheusText('# TYPE a gauge\na 1')).toThrow('newline');
    expect(() =>
      parsePrometheusText(
        '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 1\n',
      ),
    ).toThrow('cumulative');
    expect(
      parsePrometheusText('# HELP a x\n# TYPE a gauge\na{x="q\\"\\\\"} +Inf\n').get('a')!
        .samples[0],
    ).toEqual({ name: 'a', labels: { x: 'q"\\' }, value: Infinity });
  });
});

describe('metrics: status events', () => {
  it('counts events by outcome and shows the lag, whether they flow and the age of the last one; 0 when events are off', async () => {
    const at = '2026-11-18T06:00:00.000Z';
    const withEvents = (): GatewayStatus => ({
      ...status(),
      generatedAt: '2026-11-18T06:00:30.000Z',
      statusEvents: {
        state: 'flowing',
        topic: 't',
        since: at,
        received: 10,
        applied: 6,
        duplicates: 2,
        ignored: 1,
        invalid: 1,
        lag: 3,
        lastEventAt: at,
        lastReadAt: at,
      },
    });
    const families = parsePrometheusText(
      await new GatewayMetrics({ status: withEvents, batchCounts: () => [] }).text(),
    );
    expect(value(families, 'scan_gateway_status_events_received_total')).toBe(10);
    expect(value(families, 'scan_gateway_status_events_total', { outcome: 'applied' })).toBe(6);
    expect(value(families, 'scan_gateway_status_events_total', { outcome: 'duplicate' })).toBe(2);
    expect(value(families, 'scan_gateway_status_events_total', { outcome: 'ignored' })).toBe(1);
    expect(value(families, 'scan_gateway_status_events_total', { outcome: 'invalid' })).toBe(1);
    expect(value(families, 'scan_gateway_status_events_lag')).toBe(3);
    expect(value(families, 'scan_gateway_status_events_up')).toBe(1);
    expect(value(families, 'scan_gateway_status_events_last_event_age_seconds')).toBe(30);
    const off = parsePrometheusText(
      await new GatewayMetrics({ status, batchCounts: () => [] }).text(),
    );
    expect(value(off, 'scan_gateway_status_events_up')).toBe(0);
    expect(value(off, 'scan_gateway_status_events_lag')).toBe(0);
    expect(value(off, 'scan_gateway_status_events_received_total')).toBe(0);
  });

  it("gives the disk guard's estimate of how long the free space lasts, and nothing without one", async () => {
    const disk = {
      lowFreeBytes: 1,
      reserveBytes: 0,
      reserveReleased: false,
      prunedEarlyScans: 0,
    };
    const withRunway = (): GatewayStatus => {
      const s = status();
      s.buffer.disk = {
        ...disk,
        runway: {
          days: 12.5,
          scansPerDay: 3_500_000,
          bytesPerScan: 750,
          windowMs: 86_400_000,
          text: "12 days of scans at today's rate",
        },
      };
      return s;
    };
    const families = parsePrometheusText(
      await new GatewayMetrics({ status: withRunway, batchCounts: () => [] }).text(),
    );
    expect(value(families, 'scan_gateway_buffer_disk_runway_days')).toBe(12.5);
    const without = (): GatewayStatus => {
      const s = status();
      s.buffer.disk = disk;
      return s;
    };
    const none = parsePrometheusText(
      await new GatewayMetrics({ status: without, batchCounts: () => [] }).text(),
    );
    expect(value(none, 'scan_gateway_buffer_disk_runway_days')).toBeNaN();
  });
});
