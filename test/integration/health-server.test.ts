import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig, parseConfigText } from '../../src/config/load.js';
import { readiness } from '../../src/health/server.js';
import type { GatewayStatus } from '../../src/health/status.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { waitFor } from '../helpers/wait.js';
import { parsePrometheusText, type Family } from '../unit/metrics-text-parser.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const TOKEN = 'test-admin-token-0123456789';
const GS = '\u001d';

function configFile(dir: string, sandboxUrl: string): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: health-test, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 100, statusPollMs: 100, statusPollMaxMs: 300, retryBaseMs: 100, retryMaxMs: 300 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
  - { key: XX-99, kind: endOfProcess, productModelKey: PACK-A }
inputs:
  - { id: goods-in, type: files, dir: ${join(dir, 'goods-in')}, format: lines, dcp: GI-01, stableMs: 100 }
  - { id: unknown-dcp, type: files, dir: ${join(dir, 'unknown-dcp')}, format: lines, dcp: XX-99, stableMs: 100 }
`,
  );
  return file;
}

async function startApp(dir: string, sandbox: RunningSandbox, adminToken?: string): Promise<App> {
  const loaded = loadConfig(configFile(dir, sandbox.url), {
    baseDir: dir,
    env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET },
  });
  const app = buildApp(loaded, { logger: silentLogger(), ...(adminToken ? { adminToken } : {}) });
  await app.start();
  return app;
}

const get = async (app: App, path: string) => fetch(`${app.httpUrl}${path}`);
const admin = (app: App, action: string, token?: string, body?: unknown) =>
  fetch(`${app.httpUrl}/api/v1/admin/${action}`, {
    method: 'POST',
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
const statusOf = async (app: App) =>
  (await (await get(app, '/api/v1/status')).json()) as GatewayStatus;
const sample = (
  f: Map<string, Family>,
  family: string,
  name: string,
  labels: Record<string, string>,
) =>
  f
    .get(family)
    ?.samples.find(
      (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
    )?.value;

describe('health server of a running gateway', () => {
  let sandbox: RunningSandbox;
  let app: App;
  let dir: string;

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 100 });
    dir = mkdtempSync(join(tmpdir(), 'sg-health-'));
    app = await startApp(dir, sandbox, TOKEN);
    writeFileSync(join(dir, 'goods-in', 'a.txt'), 'CELL-0001\nCELL-0002\nCELL-0003\n');
    writeFileSync(join(dir, 'unknown-dcp', 'b.txt'), `PACK-<b>9</b>${GS}21X\n`);
    await waitFor(
      async () => {
        const s = await statusOf(app);
        return (
          s.batches.length > 0 &&
          s.batches.every((b) => b.state === 'done') &&
          s.buffer.undeliveredScans === 0 &&
          (s.buffer.scans.delivered ?? 0) === 3
        );
      },
      { timeoutMs: 30_000 },
    );
  });
  afterAll(async () => {
    await app?.stop();
    await sandbox?.close();
  });

  it('GET /healthz keeps its summary, counts held scans and rejections, and says why it is degraded', async () => {
    const res = await get(app, '/healthz');
    expect(res.status).toBe(200);
    // The service refused one scan (Invalid DCP) within the hour: a dead letter degrades health.
    const refused =
      'The service refused 1 scan in the last 60 minutes; they are kept and can be replayed once the cause is fixed.';
    expect(await res.json()).toEqual({
      status: 'degraded',
      reasons: [refused],
      problems: [{ code: 'SCANGW_H_SCANS_FAILED', severity: 'degraded', sentence: refused }],
      pendingScans: 0,
      waitingScans: 0,
      heldScans: 0,
      oldestPendingAgeMs: null,
      deliveredScans: 3,
      failedScans: 1,
      rejectedReads: 0,
      rejectedReadsLastHour: 0,
      filesRefusedLastHour: 0,
      lastSuccessfulUploadAt: expect.any(String),
      inputs: [
        { id: 'goods-in', type: 'files', state: 'up' },
        { id: 'unknown-dcp', type: 'files', state: 'up' },
      ],
    });
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('GET /readyz is ready while running', async () => {
    const res = await get(app, '/readyz');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ready: true });
  });

  it('GET /api/v1/status has everything the page shows', async () => {
    const s = await statusOf(app);
    expect(s).toMatchObject({
      state: 'degraded',
      phase: 'running',
      site: { id: 'health-test', timezone: 'Europe/Berlin' },
      admin: { enabled: true, actions: ['retry', 'pause', 'resume', 'replay', 'close-container'] },
    });
    expect(s.healthProblems).toEqual([
      {
        code: 'SCANGW_H_SCANS_FAILED',
        severity: 'degraded',
        sentence: expect.stringMatching(/^The service refused 1 scan /),
        hint: expect.stringContaining('scan-gateway replay'),
      },
    ]);
    expect(s.recent).toEqual({
      windowMs: 3_600_000,
      reads: 4,
      rejections: 0,
      filesRefused: 0,
      failedScans: 1,
    });
    // One time format: every instant of the status is ISO 8601 UTC; no Date objects, no ms numbers.
    const instants: string[] = [];
    JSON.stringify(s, (key, value: unknown) => {
      if (/(At|Time)$/.test(key) && value !== null && value !== undefined)
        instants.push(`${key}=${String(value)}`);
      return value;
    });
    expect(instants.length).toBeGreaterThan(5);
    for (const i of instants) expect(i).toMatch(/=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    expect(Date.parse(s.generatedAt!)).not.toBeNaN();
    expect(s.inputs.find((i) => i.id === 'goods-in')!.counters).toMatchObject({
      reads: 3,
      scans: 3,
      lastReadAt: expect.any(String),
    });
    expect(s.buffer.fileBytes).toBeGreaterThan(0);
    expect(s.delivery).toMatchObject({ circuit: 'closed', paused: false, token: { refreshes: 1 } });
    expect(s.batches.map((b) => b.upstreamState).sort()).toEqual(
      ['HasFailures', 'Success'].slice(0, s.batches.length).sort(),
    );
    const failed = s.problems.find((p) => p.kind === 'failed')!;
    expect(failed).toMatchObject({
      inputId: 'unknown-dcp',
      reason: 'Invalid DCP',
      raw: 'PACK-<b>9</b><GS>21X',
    });
  });

  it('GET /metrics parses and carries the series', async () => {
    const res = await get(app, '/metrics');
    expect(res.headers.get('content-type')).toContain('text/plain');
    const f = parsePrometheusText(await res.text());
    expect(
      sample(f, 'scan_gateway_reads_total', 'scan_gateway_reads_total', {
        input: 'goods-in',
        outcome: 'scan',
      }),
    ).toBe(3);
    expect(
      sample(f, 'scan_gateway_batches', 'scan_gateway_batches', {
        mode: 'direct',
        state: 'HasFailures',
      }),
    ).toBeGreaterThanOrEqual(0);
    const finished = f
      .get('scan_gateway_batches')!
      .samples.filter((x) => ['Success', 'HasFailures'].includes(x.labels.state!))
      .reduce((a, x) => a + x.value, 0);
    expect(finished).toBeGreaterThanOrEqual(1);
    expect(
      sample(
        f,
        'scan_gateway_upload_duration_seconds',
        'scan_gateway_upload_duration_seconds_count',
        { mode: 'direct', outcome: 'ok' },
      ),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sample(f, 'scan_gateway_token_refreshes_total', 'scan_gateway_token_refreshes_total', {}),
    ).toBe(1);
    expect(sample(f, 'scan_gateway_pending_scans', 'scan_gateway_pending_scans', {})).toBe(0);
    expect(
      sample(f, 'scan_gateway_delivery_circuit_state', 'scan_gateway_delivery_circuit_state', {
        state: 'closed',
      }),
    ).toBe(1);
    expect(
      sample(f, 'process_resident_memory_bytes', 'process_resident_memory_bytes', {}),
    ).toBeGreaterThan(0);
    const lastUpload = sample(
      f,
      'scan_gateway_last_upload_success_timestamp_seconds',
      'scan_gateway_last_upload_success_timestamp_seconds',
      {},
    )!;
    expect(lastUpload * 1000).toBe(Date.parse((await statusOf(app)).delivery.lastSuccessAt!));
    expect(
      sample(f, 'scan_gateway_health_problems', 'scan_gateway_health_problems', {
        code: 'SCANGW_H_SCANS_FAILED',
        severity: 'degraded',
      }),
    ).toBe(1);
  });

  it('GET / serves the page with its CSP, the failure reason and the raw read escaped', async () => {
    const res = await get(app, '/');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await res.text();
    expect(html).toContain('Invalid DCP');
    expect(html).toContain('PACK-&lt;b&gt;9&lt;/b&gt;<span class="ctl">GS</span>21X');
    expect(html).not.toContain('<b>9</b>');
    expect(html).toContain('data-action="replay"');
  });

  it('admin actions need the token, compared in full', async () => {
    const none = await admin(app, 'pause');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toContain('Bearer');
    expect((await admin(app, 'pause', 'wrong-token-0123456789')).status).toBe(401);
    expect((await admin(app, 'pause', TOKEN.slice(0, -1))).status).toBe(401);
    expect((await admin(app, 'pause', `${TOKEN}x`)).status).toBe(401);
    expect((await statusOf(app)).delivery.paused).toBe(false);
    expect((await admin(app, 'explode', TOKEN)).status).toBe(404);
  });

  it('pause holds uploads back, resume and retry let them go', async () => {
    const paused = await admin(app, 'pause', TOKEN);
    expect(paused.status).toBe(200);
    expect(await paused.json()).toMatchObject({ ok: true, action: 'pause' });
    expect((await statusOf(app)).delivery.paused).toBe(true);
    writeFileSync(join(dir, 'goods-in', 'c.txt'), 'CELL-0004\n');
    await waitFor(async () => (await statusOf(app)).buffer.pendingScans === 1, {
      timeoutMs: 30_000,
    });
    // Well past the batch delay: still pending, nothing uploaded while paused.
    await new Promise((r) => setTimeout(r, 1000));
    expect((await statusOf(app)).buffer.pendingScans).toBe(1);
    const resumed = await admin(app, 'resume', TOKEN);
    expect(resumed.status).toBe(200);
    const retry = await admin(app, 'retry', TOKEN);
    expect(await retry.json()).toMatchObject({
      ok: true,
      action: 'retry',
      batches: expect.any(Number),
    });
    await waitFor(async () => (await statusOf(app)).buffer.scans.delivered === 4, {
      timeoutMs: 30_000,
    });
  });

  it('replay maps the dead letters again and queues them', async () => {
    expect((await admin(app, 'replay', TOKEN, { reason: 42 })).status).toBe(400);
    const res = await admin(app, 'replay', TOKEN, { reason: 'Invalid DCP' });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      ok: true,
      action: 'replay',
      selected: 1,
      queued: 1,
      notQueued: 0,
    });
    // The sandbox still does not know XX-99: the replayed scan fails again, with its reason.
    // The sandbox still does not know XX-99: the replayed scan goes out in a new batch and fails again, with its reason.
    await waitFor(
      async () => {
        const s = await statusOf(app);
        return (
          s.buffer.scans.replayed === 1 &&
          s.buffer.scans.failed === 1 &&
          s.batches[0]!.upstreamState === 'Failed' &&
          s.batches[0]!.scanCount === 1
        );
      },
      { timeoutMs: 30_000 },
    );
  });
});

describe('health server without an admin token', () => {
  it('shows no buttons and refuses admin actions', async () => {
    const sandbox = await startSandbox({ port: 0 });
    const dir = mkdtempSync(join(tmpdir(), 'sg-health-noadmin-'));
    mkdirSync(join(dir, 'goods-in'));
    const app = await startApp(dir, sandbox);
    try {
      const s = await statusOf(app);
      expect(s.admin).toEqual({ enabled: false, actions: [] });
      // The inline script carries the renderers' source: the page's own markup has no button.
      const page = (await (await get(app, '/')).text()).replace(/<script>[\s\S]*?<\/script>/g, '');
      expect(page).not.toContain('data-action="');
      const res = await admin(app, 'pause', TOKEN);
      expect(res.status).toBe(403);
      expect(((await res.json()) as { error: string }).error).toContain(
        'no admin token is configured',
      );
    } finally {
      await app.stop();
      await sandbox.close();
    }
  });
});

describe('readiness and listen address', () => {
  const base = { state: 'ok', reasons: [] } as unknown as GatewayStatus;
  it('is not ready while starting, stopping or down', () => {
    expect(readiness({ ...base, phase: 'starting' })).toEqual({ ready: false, reason: 'starting' });
    expect(readiness({ ...base, phase: 'stopping' })).toEqual({ ready: false, reason: 'stopping' });
    expect(
      readiness({
        ...base,
        phase: 'running',
        state: 'down',
        reasons: ['buffer commit failing: SQLITE_FULL'],
      }),
    ).toEqual({ ready: false, reason: 'buffer commit failing: SQLITE_FULL' });
    expect(
      readiness({
        ...base,
        phase: 'running',
        state: 'degraded',
        reasons: ['upstream unreachable'],
      }),
    ).toEqual({ ready: true });
  });

  it('listens on loopback unless told otherwise', () => {
    const config = parseConfigText(
      'site: { id: s, timezone: UTC }\nupstream: { baseUrl: https://x, authUrl: https://x, clientId: c }\ndcps: [{ key: D, kind: startOfProcess, productModelKey: P }]\ninputs: []\n',
      'c.yaml',
    );
    expect(config.http.listen).toBe('127.0.0.1:8080');
    expect(config.http.adminTokenFile).toBeUndefined();
  });
});
