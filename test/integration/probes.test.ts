import { connect, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS, type HttpLimitsConfig } from '../../src/config/schema.js';
import { GatewayMetrics } from '../../src/health/metrics.js';
import { buildHealthServer } from '../../src/health/server.js';
import type { GatewayStatus } from '../../src/health/status.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { waitFor } from '../helpers/wait.js';

const READ = 'probes-read-token-0123456789';

/** A status as the app composes it, with an election when `role` is given. */
function statusOf(phase: 'starting' | 'running' | 'stopping', role?: string): GatewayStatus {
  return {
    state: 'ok',
    reasons: [],
    phase,
    site: { id: 'probes', timezone: 'Europe/Berlin' },
    version: '0.1.0',
    startedAt: '2026-11-24T05:00:00.000Z',
    uptimeSec: 3600,
    config: { file: '/etc/scan-gateway/config.yaml', loadedAt: '2026-11-24T05:00:00.000Z' },
    buffer: { path: '/tmp/b.db', undeliveredScans: 0, oldestPendingAgeMs: null, scans: {} },
    delivery: { mode: 'direct' },
    inputs: [],
    batches: [],
    problems: [],
    ...(role
      ? {
          ha: {
            nodeId: 'node-A',
            key: '/line/leader',
            role,
            leader: role === 'leader' ? 'node-A' : 'node-B',
            epoch: 7,
            takeovers: 2,
            lastTakeover: { at: '2026-11-24T05:10:00.000Z', tookMs: 900, epoch: 7 },
            lease: { ttlMs: 5000 },
            etcd: { reachable: true, endpoint: 'http://10.0.0.9:2379' },
            possibleDuplicates: { reads: [{ reference: 'CELL-1', epoch: 7 }] },
            unmovableInputs: [],
          },
        }
      : {}),
  } as unknown as GatewayStatus;
}

let server: FastifyInstance | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await server?.close();
  server = undefined;
});

interface Started {
  port: number;
  gathers: () => number;
  set: (s: GatewayStatus) => void;
  log: ReturnType<typeof memoryLogger>;
  metrics: GatewayMetrics;
}

/** The health server on 127.0.0.1:0 over a status that counts how often it is gathered. */
async function start(
  opts: {
    limits?: Partial<HttpLimitsConfig>;
    readToken?: string;
    status?: GatewayStatus;
    now?: () => number;
  } = {},
): Promise<Started> {
  let current = opts.status ?? statusOf('running');
  let gathered = 0;
  const log = memoryLogger('info');
  const metrics = new GatewayMetrics({ status: () => undefined, batchCounts: () => [] });
  const app = buildHealthServer({
    logger: log.logger,
    status: () => {
      gathered++;
      return current;
    },
    metrics,
    limits: { ...DEFAULT_HTTP_LIMITS, ...opts.limits },
    readToken: opts.readToken,
    ...(opts.now ? { now: opts.now } : {}),
    // What the app's key holds: here the phase and the role.
    probes: {
      changeKey: () => `${current.phase}|${String((current.ha as { role?: string })?.role)}`,
    },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  server = app;
  const address = app.server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no address');
  return {
    port: address.port,
    gathers: () => gathered,
    set: (s) => (current = s),
    log,
    metrics,
  };
}

/** A raw connection that keeps what it receives; `gone` resolves when the server closes it. */
function raw(
  port: number,
  from = '127.0.0.1',
): Promise<Socket & { received: string; gone: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const s = connect({ port, host: '127.0.0.1', localAddress: from }) as Socket & {
      received: string;
      gone: Promise<void>;
    };
    s.received = '';
    sockets.push(s);
    s.gone = new Promise((done) => s.once('close', () => done()));
    s.on('data', (d: Buffer) => (s.received += d.toString('latin1')));
    s.on('error', () => undefined);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

const head = (port: number, path: string, extra = '') =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${extra}\r\n`;
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);

describe('probes that cost nothing', () => {
  it('answers a flood of probes from a snapshot: at most one gather a second, and a change at once', async () => {
    const s = await start({ limits: { maxRequestsPerConnectionPerSecond: 0 } });
    const before = s.gathers();
    const started = Date.now();
    // 1,200 probes pipelined on four connections, as fast as the server takes them.
    const conns = await Promise.all([1, 2, 3, 4].map(() => raw(s.port)));
    for (const c of conns)
      c.write(
        Array.from({ length: 300 }, (_, i) =>
          head(s.port, ['/healthz', '/readyz', '/api/v1/ha/leader'][i % 3]!),
        ).join(''),
      );
    await waitFor(() => conns.every((c) => statuses(c.received).length === 300), {
      timeoutMs: 30_000,
      what: 'every probe answered',
    });
    const elapsedMs = Date.now() - started;
    const answered = conns.flatMap((c) => statuses(c.received));
    expect(answered.filter((code) => code === '200')).toHaveLength(800);
    // The leader check answers 503 without `ha`.
    expect(answered.filter((code) => code === '503')).toHaveLength(400);
    // Nothing changed: one gather per started second at most, whatever the machine's speed.
    expect(s.gathers() - before).toBeLessThanOrEqual(Math.floor(elapsedMs / 1000) + 1);

    // A change of the cheap facts (the phase) is shown without waiting for the second to pass.
    s.set(statusOf('stopping'));
    await waitFor(async () => (await fetch(`http://127.0.0.1:${s.port}/readyz`)).status === 503, {
      timeoutMs: 5000,
      what: '/readyz says stopping',
    });
    expect(await (await fetch(`http://127.0.0.1:${s.port}/readyz`)).json()).toEqual({
      ready: false,
      reason: 'stopping',
    });
  });

  it('cuts a connection that pipelines past its budget, and serves another meanwhile', async () => {
    const s = await start();
    const perSecond = DEFAULT_HTTP_LIMITS.maxRequestsPerConnectionPerSecond;
    const flood = await raw(s.port);
    const started = Date.now();
    flood.write(Array.from({ length: 1000 }, () => head(s.port, '/readyz')).join(''));
    const other = await fetch(`http://127.0.0.1:${s.port}/healthz`);
    expect(other.status).toBe(200);
    await flood.gone;
    const elapsedSec = (Date.now() - started) / 1000;
    const codes = statuses(flood.received);
    // The budget and what refilled while the server read: never the whole thousand.
    const ok = codes.filter((c) => c === '200').length;
    expect(ok).toBeGreaterThanOrEqual(perSecond);
    expect(ok).toBeLessThanOrEqual(perSecond + Math.ceil(perSecond * elapsedSec));
    // One 429 that says to come back, then the server closed the connection: nothing after it.
    expect(codes.filter((c) => c === '429')).toHaveLength(1);
    expect(codes.at(-1)).toBe('429');
    const refusal = flood.received.slice(flood.received.lastIndexOf('HTTP/1.1 429'));
    expect(refusal).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(refusal).toMatch(/\r\nconnection: close\r\n/i);
    expect(refusal).toContain('maxRequestsPerConnectionPerSecond');
    expect(await s.metrics.text()).toMatch(
      /scan_gateway_http_refused_total\{reason="connection_requests"\} 1\n/,
    );
    expect(
      s.log.parsed().filter((l) => l.msg.startsWith('connection closed: it sent more requests')),
    ).toHaveLength(1);
  });

  it('cuts a connection that sends one request after another past its budget', async () => {
    const perSecond = 5;
    const s = await start({ limits: { maxRequestsPerConnectionPerSecond: perSecond } });
    const c = await raw(s.port);
    const started = Date.now();
    let sent = 0;
    // One at a time, each after the previous answer, until refused (a thousand at most).
    while (sent < 1000 && !/ 429 /.test(c.received)) {
      const answered = statuses(c.received).length;
      c.write(head(s.port, '/healthz'));
      sent++;
      await waitFor(() => statuses(c.received).length > answered, {
        timeoutMs: 10_000,
        what: 'the answer',
      });
    }
    const elapsedSec = (Date.now() - started) / 1000;
    await c.gone;
    expect(statuses(c.received).at(-1)).toBe('429');
    expect(sent - 1).toBeLessThanOrEqual(perSecond + Math.ceil(perSecond * elapsedSec));
  });

  it('closes new connections of an unlisted address cut for its budget until its Retry-After, not the loopback', async () => {
    let clock = Date.parse('2026-11-28T18:00:00Z');
    const s = await start({ limits: { maxRequestsPerConnectionPerSecond: 5 }, now: () => clock });
    const pipeline = (port: number, n: number) =>
      Array.from({ length: n }, () => head(port, '/healthz')).join('');
    for (const from of ['127.0.0.3', '127.0.0.1']) {
      const cut = await raw(s.port, from);
      cut.write(pipeline(s.port, 50));
      await cut.gone;
      expect(statuses(cut.received).at(-1)).toBe('429');
    }
    // The unlisted address: closed at accept, nothing answered, while the listener's clock stands.
    const refused = await raw(s.port, '127.0.0.3');
    refused.write(head(s.port, '/healthz'));
    await refused.gone;
    expect(refused.received).toBe('');
    // The loopback (trusted: the gateway's own probes may share it) and any other address: served.
    for (const from of ['127.0.0.1', '127.0.0.4']) {
      const ok = await raw(s.port, from);
      ok.write(head(s.port, '/healthz', 'Connection: close\r\n'));
      await ok.gone;
      expect(statuses(ok.received), from).toEqual(['200']);
    }
    // The loopback reconnecting at once buys no fresh burst: its next connection starts with one
    // request of budget (a health check's), so the pipeline behind it is cut at the second.
    const burst = await raw(s.port, '127.0.0.1');
    burst.write(pipeline(s.port, 10));
    await burst.gone;
    expect(statuses(burst.received)).toEqual(['200', '429']);
    // Once its Retry-After (1 s) has passed on the listener's clock, the address is served again,
    // and the loopback has its whole budget again.
    clock += 1000;
    const again = await raw(s.port, '127.0.0.3');
    again.write(head(s.port, '/healthz', 'Connection: close\r\n'));
    await again.gone;
    expect(statuses(again.received)).toEqual(['200']);
    const whole = await raw(s.port, '127.0.0.1');
    whole.write(pipeline(s.port, 5) + head(s.port, '/healthz', 'Connection: close\r\n'));
    await whole.gone;
    expect(statuses(whole.received)).toEqual(['200', '200', '200', '200', '200', '429']);
    const text = await s.metrics.text();
    expect(text).toMatch(/scan_gateway_http_refused_total\{reason="connection_cooldown"\} 1\n/);
    expect(text).toMatch(/scan_gateway_http_refused_total\{reason="connection_requests"\} 4\n/);
    expect(
      s.log.parsed().filter((l) => l.msg.startsWith('connection refused: a connection of this')),
    ).toHaveLength(1);
  });

  it('says role, leader and epoch only on the leader check, with or without a token', async () => {
    const s = await start({ readToken: READ, status: statusOf('running', 'leader') });
    const url = `http://127.0.0.1:${s.port}/api/v1/ha/leader`;
    for (const headers of [{}, { authorization: `Bearer ${READ}` }] as Record<string, string>[]) {
      const res = await fetch(url, { headers });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        leader: true,
        role: 'leader',
        leaderNode: 'node-A',
        epoch: 7,
      });
    }
    // The standby: 503, whose standby it is, nothing of etcd, takeovers or duplicates.
    s.set(statusOf('running', 'follower'));
    await waitFor(async () => (await fetch(url)).status === 503, {
      timeoutMs: 5000,
      what: 'the follower answers 503',
    });
    const body = await (await fetch(url)).text();
    expect(JSON.parse(body)).toEqual({
      leader: false,
      role: 'follower',
      leaderNode: 'node-B',
      epoch: 7,
    });
    expect(body).not.toMatch(/etcd|10\.0\.0\.9|takeover|CELL-1|nodeId/i);
    // /healthz keeps its ha summary behind the read token, and only the state without it.
    expect(await (await fetch(`http://127.0.0.1:${s.port}/healthz`)).json()).toEqual({
      status: 'ok',
    });
  });
});
