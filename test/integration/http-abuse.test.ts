import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig, parseConfigText } from '../../src/config/load.js';
import { DEFAULT_HTTP_LIMITS, type HttpLimitsConfig } from '../../src/config/schema.js';
import { isGatewayError } from '../../src/errors.js';
import { hostAllowList } from '../../src/listener/host-check.js';
import { GatewayMetrics } from '../../src/health/metrics.js';
import { buildHealthServer } from '../../src/health/server.js';
import type { GatewayStatus } from '../../src/health/status.js';
import { registerIngestRoutes } from '../../src/inputs/http/ingest-routes.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { memoryLogger } from '../helpers/log-lines.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The local HTTP surface under abuse, against real listeners on 127.0.0.1:0:
 * half-open connections, the connection cap, foreign Host headers, the read token, rate-limited
 * refusal lines, short ingest tokens.
 */

const ADMIN = 'admin-token-0123456789abcdef';
const INGEST = 'ingest-token-0123456789abcdef';
const READ = 'read-token-0123456789abcdef';

function status(): GatewayStatus {
  return {
    state: 'ok',
    reasons: [],
    phase: 'running',
    generatedAt: '2026-11-24T06:00:00.000Z',
    site: { id: 'abuse', timezone: 'Europe/Berlin' },
    version: '0.1.0',
    startedAt: '2026-11-24T05:00:00.000Z',
    uptimeSec: 3600,
    config: { file: '/etc/scan-gateway/config.yaml', loadedAt: '2026-11-24T05:00:00.000Z' },
    buffer: {
      path: '/tmp/b.db',
      pendingScans: 0,
      undeliveredScans: 0,
      oldestPendingAgeMs: null,
      scans: {},
      fileBytes: 0,
    },
    delivery: { mode: 'direct', circuit: 'closed', paused: false, consecutiveFailures: 0 },
    inputs: [
      {
        id: 'mes',
        type: 'http',
        state: 'up',
        source: 'POST /api/v1/reads',
        lastError: 'broker.plant.local refused',
        counters: { reads: 0, scans: 0, noReads: 0, rejections: 0, duplicates: 0, bytes: 0 },
      },
    ],
    batches: [],
    problems: [],
  } as unknown as GatewayStatus;
}

let server: FastifyInstance | undefined;
let sandbox: RunningSandbox | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await server?.close();
  server = undefined;
  await sandbox?.close();
  sandbox = undefined;
});

interface Started {
  port: number;
  log: ReturnType<typeof memoryLogger>;
  metrics: GatewayMetrics;
}

async function startServer(
  options: {
    limits?: Partial<HttpLimitsConfig>;
    readToken?: string;
    allowedHosts?: string[];
    intervalMs?: number;
  } = {},
): Promise<Started> {
  const log = memoryLogger('info');
  const metrics = new GatewayMetrics({ status: () => undefined, batchCounts: () => [] });
  const app = buildHealthServer({
    logger: log.logger,
    status,
    metrics,
    admin: {
      token: ADMIN,
      actions: {
        retry: () => ({ message: 'ok' }),
        pause: () => ({ message: 'ok' }),
        resume: () => ({ message: 'ok' }),
      },
    },
    limits: { ...DEFAULT_HTTP_LIMITS, ...options.limits },
    listenHost: '127.0.0.1',
    allowedHosts: options.allowedHosts ?? [],
    readToken: options.readToken,
    refusalLogIntervalMs: options.intervalMs ?? 10_000,
  });
  await registerIngestRoutes(app, {
    sink: {
      submit: async (items) => ({ outcomes: items.map(() => ({ outcome: 'scan' as const })) }),
    },
    inputId: 'mes',
    tokens: [INGEST],
    maxBodyBytes: 4096,
    isPaused: () => false,
    logger: log.logger,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  server = app;
  const address = app.server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no address');
  return { port: address.port, log, metrics };
}

/** One request by node:http (fetch would not let a test choose the Host header). */
function call(
  port: number,
  path: string,
  options: { method?: string; host?: string; headers?: Record<string, string>; body?: string } = {},
) {
  return new Promise<{
    status: number;
    headers: Record<string, string | string[] | undefined>;
    body: string;
  }>((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        agent: false,
        headers: { host: options.host ?? `127.0.0.1:${port}`, ...options.headers },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A raw connection; resolves once connected. `closedAt` is set when the server closes it. */
function rawSocket(port: number): Promise<Socket & { closedAt?: number; received: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1') as Socket & { closedAt?: number; received: string };
    s.received = '';
    sockets.push(s);
    s.on('data', (d) => (s.received += d.toString('latin1')));
    s.on('close', () => (s.closedAt = Date.now()));
    s.on('error', () => {});
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

describe('timeouts and the connection cap', () => {
  it('closes 200 half-open connections by the header timeout and still answers meanwhile', async () => {
    // Long enough that opening 200 sockets and one call fit well inside it on a loaded machine:
    // "meanwhile" is an order against the server's own timer, not a figure in ms.
    const headersTimeoutMs = 5000;
    // The share per address would shed the idle ones at once (listener-fairness.test.ts): raised
    // to the cap, so what closes them here is the header timeout.
    const { port } = await startServer({
      limits: {
        headersTimeoutMs,
        requestTimeoutMs: 10_000,
        maxConnections: 256,
        maxConnectionsPerClient: 256,
      },
    });
    const opened = Date.now();
    const half = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const s = await rawSocket(port);
        // Half stay silent; half send half a request head and stop.
        if (i % 2 === 1) s.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: `);
        return s;
      }),
    );
    const answer = await call(port, '/healthz');
    expect(answer.status).toBe(200);
    expect(half.filter((s) => s.closedAt !== undefined)).toHaveLength(0);
    await waitFor(() => half.every((s) => s.closedAt !== undefined), {
      what: 'every half-open connection closed',
    });
    // Closed by the header timeout, not before it. How long after it is the machine's business
    // (node checks a quarter of the timeout apart; a loaded machine adds its own delay).
    const first = Math.min(...half.map((s) => s.closedAt ?? Infinity)) - opened;
    expect(first).toBeGreaterThanOrEqual(headersTimeoutMs - 50);
    // Those that sent part of a head are told why.
    expect(half.filter((s) => s.received.startsWith('HTTP/1.1 408')).length).toBeGreaterThan(0);
  });

  it('closes connections past the cap at once, logs it rate-limited and counts it', async () => {
    const { port, log } = await startServer({
      limits: { maxConnections: 5, headersTimeoutMs: 10_000 },
    });
    const held = await Promise.all(Array.from({ length: 5 }, () => rawSocket(port)));
    const extra = await Promise.all(Array.from({ length: 3 }, () => rawSocket(port)));
    await waitFor(() => extra.every((s) => s.closedAt !== undefined), {
      what: 'the connections past the cap closed',
    });
    extra.forEach((s) => expect(s.received).toBe(''));
    expect(held.every((s) => s.closedAt === undefined)).toBe(true);
    const lines = log
      .parsed()
      .filter((l) => l.msg.startsWith('connection refused: the connection cap is reached'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ remote: '127.0.0.1', maxConnections: 5, refused: 1 });
    for (const s of held) s.destroy();
    const open = () =>
      new Promise<number>((resolve, reject) =>
        server!.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
      );
    await waitFor(async () => (await open()) === 0, {
      what: 'the held connections closed',
    });
    const text = (await call(port, '/metrics')).body;
    expect(text).toContain('scan_gateway_http_refused_total{reason="connection_cap"} 3');
  });

  it('applies the same bounds to the sandbox', async () => {
    sandbox = await startSandbox({
      port: 0,
      limits: {
        ...DEFAULT_HTTP_LIMITS,
        headersTimeoutMs: 500,
        requestTimeoutMs: 1000,
        maxConnections: 3,
      },
    });
    const port = Number(new URL(sandbox.url).port);
    const held = await Promise.all(Array.from({ length: 3 }, () => rawSocket(port)));
    const extra = await rawSocket(port);
    await waitFor(() => extra.closedAt !== undefined, {
      what: 'the fourth connection closed',
    });
    await waitFor(() => held.every((s) => s.closedAt !== undefined), {
      what: 'the half-open ones closed',
    });
  });
});

describe('Host allow-list', () => {
  const routes: [string, string, Record<string, string>?, string?][] = [
    ['GET', '/'],
    ['GET', '/healthz'],
    ['GET', '/readyz'],
    ['GET', '/api/v1/status'],
    ['GET', '/metrics'],
    ['GET', '/no-such-page'],
    ['POST', '/api/v1/admin/retry', { authorization: `Bearer ${ADMIN}` }],
    [
      'POST',
      '/api/v1/reads',
      { authorization: `Bearer ${INGEST}`, 'content-type': 'application/json' },
      '{"code":"X1"}',
    ],
  ];

  it('answers 421 to a foreign Host on every route, and logs it once per interval with a count', async () => {
    // A minute: the calls fall in one interval on however loaded a machine; the summary line is
    // then written by the stop (each listener's refusal log is flushed on close).
    const { port, log } = await startServer({ intervalMs: 60_000 });
    for (const [method, path, headers, body] of routes) {
      const answer = await call(port, path, {
        method,
        host: `rebind.attacker.example:${port}`,
        ...(headers ? { headers } : {}),
        ...(body ? { body } : {}),
      });
      expect([path, answer.status]).toEqual([path, 421]);
      expect(JSON.parse(answer.body)).toMatchObject({
        statusCode: 421,
        message: expect.stringContaining('http.allowedHosts'),
      });
    }
    const refused = () =>
      log.parsed().filter((l) => l.msg.startsWith('request with a foreign Host header refused'));
    expect(refused()).toHaveLength(1);
    expect(refused()[0]).toMatchObject({
      remote: '127.0.0.1',
      host: `rebind.attacker.example:${port}`,
      refused: 1,
    });
    const metrics = await call(port, '/metrics');
    expect(metrics.body).toContain(
      `scan_gateway_http_refused_total{reason="host"} ${routes.length}`,
    );
    await server!.close();
    server = undefined;
    expect(refused()).toHaveLength(2);
    expect(refused()[1]).toMatchObject({ refused: routes.length - 1 });
  });

  it('answers what a loopback client sends, the listen address and configured names', async () => {
    const { port } = await startServer({
      allowedHosts: ['gateway-07.plant.local', 'scan.example:8443'],
    });
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `LOCALHOST:${port}`,
      `[::1]:${port}`,
      'localhost',
      `gateway-07.plant.local:${port}`,
      'scan.example:8443',
    ]) {
      expect([host, (await call(port, '/readyz', { host })).status]).toEqual([host, 200]);
    }
    for (const host of ['scan.example:9999', 'localhost.attacker.example', '127.0.0.1.nip.io']) {
      expect([host, (await call(port, '/readyz', { host })).status]).toEqual([host, 421]);
    }
    // No Host at all (HTTP/1.0): refused too.
    const bare = await rawSocket(port);
    bare.write('GET /readyz HTTP/1.0\r\n\r\n');
    await waitFor(() => bare.closedAt !== undefined, { what: 'the answer' });
    expect(bare.received).toMatch(/^HTTP\/1\.1 421 /);
  });

  it('accepts the machine names when listening on every address', () => {
    const allowed = hostAllowList('0.0.0.0');
    expect(allowed('127.0.0.1:8080')).toBe(true);
    expect(allowed('evil.example:8080')).toBe(false);
    expect(allowed(undefined)).toBe(false);
  });
});

describe('read token', () => {
  it('guards the page, status and metrics; Bearer or Basic; probes stay open with the state only', async () => {
    // The refusals below fall in one interval (a minute) however loaded the machine.
    const { port, log } = await startServer({ readToken: READ, intervalMs: 60_000 });
    for (const path of ['/', '/api/v1/status', '/metrics']) {
      const none = await call(port, path);
      expect([path, none.status]).toEqual([path, 401]);
      expect(none.headers['www-authenticate']).toEqual(
        expect.stringContaining('Basic realm="scan-gateway"'),
      );
      expect(
        (await call(port, path, { headers: { authorization: 'Bearer wrong-token-0123456789' } }))
          .status,
      ).toBe(401);
      expect(
        (await call(port, path, { headers: { authorization: `Bearer ${READ}` } })).status,
      ).toBe(200);
      const basic = Buffer.from(`operator:${READ}`).toString('base64');
      expect(
        (await call(port, path, { headers: { authorization: `Basic ${basic}` } })).status,
      ).toBe(200);
      const wrongBasic = Buffer.from(`${READ}:nope`).toString('base64');
      expect(
        (await call(port, path, { headers: { authorization: `Basic ${wrongBasic}` } })).status,
      ).toBe(401);
    }
    const probe = await call(port, '/healthz');
    expect(probe.status).toBe(200);
    expect(JSON.parse(probe.body)).toEqual({ status: 'ok' });
    const full = JSON.parse(
      (await call(port, '/healthz', { headers: { authorization: `Bearer ${READ}` } })).body,
    ) as Record<string, unknown>;
    expect(full).toMatchObject({
      status: 'ok',
      inputs: [{ id: 'mes', lastError: 'broker.plant.local refused' }],
    });
    expect((await call(port, '/readyz')).status).toBe(200);
    const metrics = (await call(port, '/metrics', { headers: { authorization: `Bearer ${READ}` } }))
      .body;
    // Per path: one without a token, one wrong Bearer, one wrong Basic.
    expect(metrics).toContain('scan_gateway_http_refused_total{reason="read_token"} 9');
    expect(log.parsed().filter((l) => l.msg.startsWith('read call refused'))).toHaveLength(1);
    expect(log.lines.join('\n')).not.toContain(READ);
    expect(log.lines.join('\n')).not.toContain('wrong-token-0123456789');
  });

  it('leaves everything open without one', async () => {
    const { port } = await startServer();
    for (const path of ['/', '/api/v1/status', '/metrics'])
      expect((await call(port, path)).status).toBe(200);
  });
});

describe('refused admin calls', () => {
  it('are logged at most once per interval, with a count and who, never the token', async () => {
    // A short interval, so that its summary line comes by its timer. How many intervals the 30
    // calls span is the machine's business: the lines are checked for what each says and for
    // their counts adding up, not for how many there are.
    const intervalMs = 400;
    const { port, log } = await startServer({ intervalMs });
    for (let i = 0; i < 30; i++) {
      const answer = await call(port, '/api/v1/admin/pause', {
        method: 'POST',
        headers: { authorization: 'Bearer guessed-token-number-1' },
      });
      expect(answer.status).toBe(401);
    }
    const refused = () => log.parsed().filter((l) => l.msg.startsWith('admin call refused'));
    const sum = () => refused().reduce((n, l) => n + Number(l['refused']), 0);
    await waitFor(() => sum() === 30, { what: 'all 30 refusals on the lines' });
    const lines = refused();
    expect(lines[0]).toMatchObject({ refused: 1, remote: '127.0.0.1', given: 'wrong token' });
    expect(lines[0]!.msg).toBe('admin call refused');
    for (const l of lines.slice(1)) {
      expect(l).toMatchObject({ remote: '127.0.0.1', given: 'wrong token', intervalMs });
      // A summary line says its count; a line at once (after a quiet interval) stands for one.
      const said =
        l.msg === 'admin call refused'
          ? l['refused'] === 1
          : l.msg === `admin call refused (${String(l['refused'])} since the last line)`;
      expect(said, l.msg).toBe(true);
    }
    // On an idle machine the 30 calls take one interval: one line at once and one summary.
    console.log(`refused admin calls: lines ${lines.map((l) => l['refused']).join(', ')}`);
    expect(log.lines.join('\n')).not.toContain('guessed-token-number-1');
    // A quiet period later (two intervals; longer on a slow machine, which changes nothing), the
    // next refusal is logged at once again.
    await new Promise((r) => setTimeout(r, 2 * intervalMs));
    await call(port, '/api/v1/admin/pause', { method: 'POST' });
    expect(refused()).toHaveLength(lines.length + 1);
    expect(refused().at(-1)).toMatchObject({ refused: 1, given: 'no token' });
    // Counted, with the ingest route's refusals beside them.
    expect(
      (
        await call(port, '/api/v1/reads', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"code":"X"}',
        })
      ).status,
    ).toBe(401);
    const metrics = (await call(port, '/metrics')).body;
    expect(metrics).toContain('scan_gateway_http_refused_total{reason="admin_token"} 31');
    expect(metrics).toContain('scan_gateway_http_refused_total{reason="ingest_token"} 1');
  });
});

describe('ingest token length', () => {
  const yaml = (extra: string) => `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: MES-1, kind: startOfProcess, productModelKey: PACK-A }
inputs:
  - { id: mes, type: http, dcp: MES-1${extra} }
`;

  it('refuses a token shorter than 16 characters at load, naming the input and the source, not the value', () => {
    const dir = mkdtempSync(join(tmpdir(), 'scangw-token-'));
    try {
      const file = join(dir, 'config.yaml');
      writeFileSync(file, yaml(''));
      const fromEnv = (() => {
        try {
          loadConfig(file, {
            baseDir: dir,
            env: { SCAN_GATEWAY_INGEST_TOKEN: 'short-secret-1' },
            skipSecret: true,
          });
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      expect(isGatewayError(fromEnv, 'SCANGW_E_CONFIG')).toBe(true);
      expect((fromEnv as Error).message).toContain(
        'input mes: the ingest token from the environment variable SCAN_GATEWAY_INGEST_TOKEN is shorter than 16 characters',
      );
      expect((fromEnv as Error).message).toContain('inputs[mes].tokenEnv');
      expect((fromEnv as Error).message).not.toContain('short-secret-1');

      writeFileSync(join(dir, 'ingest-token'), 'tiny\n');
      writeFileSync(file, yaml(', tokenFile: ingest-token'));
      expect(() => loadConfig(file, { baseDir: dir, env: {}, skipSecret: true })).toThrow(
        /input mes: the ingest token from the file .*ingest-token is shorter than 16 characters/,
      );

      writeFileSync(join(dir, 'ingest-token'), `${INGEST}\n`);
      expect(
        loadConfig(file, { baseDir: dir, env: {}, skipSecret: true }).config.inputs[0],
      ).toMatchObject({ id: 'mes', maxReadLength: 4096 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the running gateway', () => {
  const api = {
    uploadScans: async () => ({ requestId: 'r-1' }),
    requestPresignedUpload: async () => ({ url: 'http://127.0.0.1:9/x', requestId: 'r-2' }),
    putPresigned: async () => undefined,
    getScanStatus: async (requestId: string) => ({ state: 'Success' as const, requestId }),
  };
  let gateway: App | undefined;
  let dir: string;
  afterEach(async () => {
    await gateway?.stop();
    gateway = undefined;
    rmSync(dir, { recursive: true, force: true });
  });
  const start = async (http: string, readToken?: string) => {
    dir = mkdtempSync(join(tmpdir(), 'scangw-http-'));
    const file = join(dir, 'config.yaml');
    const yaml = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${join(dir, 'gw.db')} }
http: ${http}
dcps:
  - { key: MES-1, kind: startOfProcess, productModelKey: PACK-A }
inputs:
  - { id: mes, type: http, dcp: MES-1 }
`;
    const log = memoryLogger('info');
    gateway = buildApp(
      { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
      {
        logger: log.logger,
        api,
        env: { SCAN_GATEWAY_INGEST_TOKEN: INGEST },
        ...(readToken ? { readToken } : {}),
      },
    );
    await gateway.start();
    return { log, port: Number(new URL(gateway.httpUrl!).port) };
  };
  const warning = (log: ReturnType<typeof memoryLogger>) =>
    log.parsed().filter((l) => l.msg.startsWith('http.listen is not loopback and no read token'));

  it('warns at start when listening beyond loopback without a read token; Host list and limits from the configuration', async () => {
    const { log, port } = await start(
      '{ listen: "0.0.0.0:0", allowedHosts: [gw.plant.local], limits: { maxConnections: 2, headersTimeoutMs: 5000 } }',
    );
    expect(warning(log)).toHaveLength(1);
    // The cap first, while no other connection is open.
    const held = await Promise.all([rawSocket(port), rawSocket(port)]);
    const extra = await rawSocket(port);
    await waitFor(() => extra.closedAt !== undefined, {
      what: 'the third connection closed',
    });
    expect(held.every((s) => s.closedAt === undefined)).toBe(true);
    for (const s of held) s.destroy();
    // Until the server has seen them closed, a request may still meet the cap.
    await waitFor(
      async () => (await call(port, '/api/v1/status').catch(() => ({ status: 0 }))).status === 200,
      { what: 'a request answered once the held connections are gone' },
    );
    expect((await call(port, '/api/v1/status', { host: `gw.plant.local:${port}` })).status).toBe(
      200,
    );
    expect(
      (
        await call(port, '/api/v1/reads', {
          method: 'POST',
          host: 'evil.example',
          headers: { authorization: `Bearer ${INGEST}`, 'content-type': 'application/json' },
          body: '{"code":"A"}',
        })
      ).status,
    ).toBe(421);
  });

  it('needs the read token once one is configured, and does not warn', async () => {
    const { log, port } = await start('{ listen: "0.0.0.0:0" }', READ);
    expect(warning(log)).toHaveLength(0);
    expect((await call(port, '/api/v1/status')).status).toBe(401);
    expect(
      (await call(port, '/api/v1/status', { headers: { authorization: `Bearer ${READ}` } })).status,
    ).toBe(200);
  });

  it('refuses limits whose request timeout is below the header timeout', () => {
    expect(() =>
      parseConfigText(
        `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
http: { limits: { headersTimeoutMs: 20000, requestTimeoutMs: 10000 } }
dcps: [{ key: MES-1, kind: startOfProcess }]
inputs: []
`,
        'c.yaml',
      ),
    ).toThrow(
      /http\.limits\.requestTimeoutMs.*requestTimeoutMs must be at least headersTimeoutMs/s,
    );
  });
});
