import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { parseConfigText } from '../../src/config/load.js';
import { isGatewayError } from '../../src/errors.js';
import {
  INGEST_PATH,
  registerIngestRoutes,
  type IngestRouteOptions,
} from '../../src/inputs/http/ingest-routes.js';
import type { IntakeSink } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { waitFor } from '../helpers/wait.js';

const TOKEN = 'ingest-test-token-1234567890';
const AUTH = { authorization: `Bearer ${TOKEN}` };

const YAML = (extra = ''): string => `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: MES-1, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
  - { key: MES-2, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
inputs:
  - { id: mes, type: http, dcp: MES-1 }
${extra}`;

interface Row {
  raw: Buffer;
  outcome: string;
  reason: string | null;
  dcp_key: string | null;
}

let dir: string;
let store: BufferStore;
let intake: Intake;
let app: FastifyInstance;
let paused = false;

async function buildServer(overrides: Partial<IngestRouteOptions> = {}): Promise<FastifyInstance> {
  app = Fastify();
  await registerIngestRoutes(app, {
    sink: intake,
    inputId: 'mes',
    tokens: [TOKEN],
    maxBodyBytes: 4096,
    maxReads: 5,
    isPaused: () => paused,
    ...overrides,
  });
  return app;
}

const rows = (): Row[] =>
  sqlOf(store)
    .prepare(`SELECT raw, outcome, reason, dcp_key FROM reads ORDER BY id`)
    .all() as Row[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sg-ingest-'));
  store = BufferStore.openAt(join(dir, 'buffer.db'));
  intake = new Intake({
    store,
    mapping: mappingContext(parseConfigText(YAML(), 'test.yaml')),
    logger: silentLogger(),
  });
  intake.open();
  paused = false;
});

afterEach(async () => {
  await app?.close();
  intake.close();
  store.close();
  await rm(dir, { recursive: true, force: true });
});

const post = (payload: unknown, headers: Record<string, string> = AUTH) =>
  app.inject({
    method: 'POST',
    url: INGEST_PATH,
    headers: { 'content-type': 'application/json', ...headers },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });

describe('POST /api/v1/reads (inject)', () => {
  it('answers 202 after committing one read, with its DCP, time, parents and attributes', async () => {
    await buildServer();
    const res = await post({
      code: 'CELL-1',
      ts: '2026-11-18T07:00:00Z',
      dcp: 'MES-2',
      parents: 'MOD-1',
      attributes: { ocv: 3.65, pass: true },
    });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ accepted: 1, scans: 1, noReads: 0, duplicates: 0, rejected: [] });
    expect(rows()).toMatchObject([{ outcome: 'scan', dcp_key: 'MES-2' }]);
    const body = JSON.parse(
      sqlOf(store).prepare('SELECT body FROM scans').pluck().get() as string,
    ) as Record<string, unknown>;
    expect(body).toMatchObject({
      reference: 'CELL-1',
      timeStamp: '2026-11-18T08:00:00',
      parents: ['MOD-1'],
    });
    expect(body['attributes']).toEqual(
      expect.arrayContaining([
        { key: 'ocv', value: '3.65' },
        { key: 'pass', value: 'true' },
      ]),
    );
  });

  it('takes an array of reads in one commit, the input DCP where none is given', async () => {
    await buildServer();
    const res = await post([{ code: 'A' }, { code: 'B', dcp: 'MES-2' }]);
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ accepted: 2, scans: 2, noReads: 0, duplicates: 0, rejected: [] });
    expect(rows().map((r) => [r.raw.toString(), r.dcp_key])).toEqual([
      ['A', 'MES-1'],
      ['B', 'MES-2'],
    ]);
  });

  it('names the well-formed reads that mapping refused in its 202, stored as rejections', async () => {
    await buildServer();
    const res = await post([
      { code: 'GOOD-1' },
      { code: 'BELL-\u0007X' },
      { code: 'C', dcp: 'NO-SUCH-DCP' },
    ]);
    expect(res.statusCode).toBe(202);
    const body = res.json() as {
      accepted: number;
      scans: number;
      rejected: { index: number; reason: string }[];
    };
    expect(body).toMatchObject({ accepted: 3, scans: 1 });
    expect(body.rejected.map((r) => r.index)).toEqual([1, 2]);
    expect(body.rejected[0]!.reason).toMatch(/control byte 0x07/);
    expect(body.rejected[1]!.reason).toMatch(/NO-SUCH-DCP/);
    expect(rows().map((r) => [r.outcome, r.reason])).toEqual([
      ['scan', null],
      ['rejected', body.rejected[0]!.reason],
      ['rejected', body.rejected[1]!.reason],
    ]);
  });

  it('stores a read longer than maxReadLength as a rejection with the reason and its first bytes, the others as reads', async () => {
    await buildServer({ maxBodyBytes: 200_000, maxReadLength: 64 });
    const long = `L${'x'.repeat(59_999)}`;
    const res = await post([{ code: 'SHORT-1' }, { code: long }, { code: 'y'.repeat(64) }]);
    expect(res.statusCode).toBe(202);
    const body = res.json() as {
      accepted: number;
      scans: number;
      rejected: { index: number; reason: string }[];
    };
    expect(body.scans).toBe(2);
    expect(body.rejected).toEqual([
      {
        index: 1,
        reason: 'read longer than maxReadLength (64 bytes): 60000 bytes; the first 256 are kept',
      },
    ]);
    const stored = rows();
    expect(stored.map((r) => r.outcome)).toEqual(['scan', 'rejected', 'scan']);
    expect(stored[1]!.raw.length).toBe(256);
    expect(stored[1]!.raw.toString('utf8')).toBe(long.slice(0, 256));
    // Counted like every rejection: in the buffer's read outcomes, which the status and metrics show.
    expect(
      sqlOf(store)
        .prepare(`SELECT COUNT(*) FROM reads WHERE outcome = 'rejected' AND input_id = 'mes'`)
        .pluck()
        .get(),
    ).toBe(1);
  });

  it('logs a refused call with who and how, never what was given, at most once per interval with a count', async () => {
    const log = memoryLogger('info');
    // A minute: the 21 calls fall in one interval on however loaded a machine; the summary line is
    // then written by the stop (the route's refusal log is flushed on close).
    const server = await buildServer({ logger: log.logger, refusalLogIntervalMs: 60_000 });
    expect(
      (await post({ code: 'X' }, { authorization: 'Bearer not-the-token-42' })).statusCode,
    ).toBe(401);
    for (let i = 0; i < 20; i++) expect((await post({ code: 'X' }, {})).statusCode).toBe(401);
    const refused = () =>
      log.parsed().filter((l) => String(l.msg).startsWith('ingest call refused'));
    // The first at once; the other 20 in one line at the end of the interval (here: the stop).
    expect(refused().map((l) => [l['given'], l['refused']])).toEqual([['wrong token', 1]]);
    await server.close();
    expect(refused().map((l) => [l['given'], l['refused']])).toEqual([
      ['wrong token', 1],
      ['no token', 20],
    ]);
    expect(refused()[1]!['remote']).toBe('127.0.0.1');
    expect(log.lines.join('\n')).not.toContain('not-the-token-42');
  });

  it('answers 401 without a valid bearer token and stores nothing', async () => {
    await buildServer();
    const variants: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong' },
      { authorization: `Basic ${TOKEN}` },
    ];
    for (const headers of variants) {
      const res = await post({ code: 'X' }, headers);
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    }
    expect(rows()).toEqual([]);
  });

  it('answers 400 naming the offending field, stores no read of that request and one rejection with the reason', async () => {
    await buildServer();
    const res = await post([{ code: 'OK-1' }, { ts: '2026-11-18T07:00:00Z' }]);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ statusCode: 400, field: '[1].code' });
    expect(res.json().message).toMatch(/read 1 is not valid: code is missing/);
    const bad = await post({ code: 'X', attributes: { nested: { no: 1 } } });
    expect(bad.json()).toMatchObject({ field: 'attributes.nested' });
    const notJson = await post('{"code": "unterminated');
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json().message).toMatch(/body is not JSON/);
    expect(rows().map((r) => r.outcome)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(rows()[2]!.raw.toString()).toBe('{"code": "unterminated');
    expect(rows()[0]!.reason).toMatch(/field \[1\]\.code/);
  });

  it('answers 413 over maxBodyBytes or maxReads, 415 for another content type', async () => {
    await buildServer();
    const big = await post({ code: 'X'.repeat(5000) });
    expect(big.statusCode).toBe(413);
    const many = await post(Array.from({ length: 6 }, (_, i) => ({ code: `M-${i}` })));
    expect(many.statusCode).toBe(413);
    expect(many.json().message).toMatch(/at most 5 reads/);
    const text = await app.inject({
      method: 'POST',
      url: INGEST_PATH,
      headers: { ...AUTH, 'content-type': 'text/plain' },
      payload: 'CODE',
    });
    expect(text.statusCode).toBe(415);
    expect(rows().map((r) => r.reason)).toEqual([
      expect.stringMatching(/larger than maxBodyBytes \(4096\)/),
      expect.stringMatching(/6 reads is more than/),
    ]);
  });

  it('answers 503 with Retry-After while paused, and when the buffer refuses the commit', async () => {
    await buildServer({ retryAfterSec: 7 });
    paused = true;
    const res = await post({ code: 'WAIT' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('7');
    paused = false;
    await app.close();
    const refusing: IntakeSink = { submit: () => Promise.reject(new Error('SQLITE_FULL')) };
    await buildServer({ sink: refusing });
    const refused = await post({ code: 'FULL' });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBe('5');
    expect(rows()).toEqual([]);
  });

  it('answers 503 with Retry-After past maxReadsInFlight, and takes requests again once those in flight are stored', async () => {
    const held: (() => void)[] = [];
    const holding: IntakeSink = {
      submit: (items, submitOptions) =>
        new Promise<void>((resolve) => held.push(resolve)).then(() =>
          intake.submit(items, submitOptions),
        ),
    };
    await buildServer({ sink: holding, maxReadsInFlight: 4 });
    const codes = (n: number, p: string) =>
      Array.from({ length: n }, (_, i) => ({ code: `${p}${i}` }));
    const first = post(codes(3, 'A'));
    await waitFor(() => held.length === 1);
    // 3 in flight + 2 > 4: refused once its reads are counted.
    const over = await post(codes(2, 'B'));
    expect(over.statusCode).toBe(503);
    expect(over.headers['retry-after']).toBe('5');
    const second = post(codes(1, 'C'));
    await waitFor(() => held.length === 2);
    // 4 in flight: refused before the body is read.
    const full = await post(codes(1, 'D'));
    expect(full.statusCode).toBe(503);
    for (const release of held) release();
    expect((await first).statusCode).toBe(202);
    expect((await second).statusCode).toBe(202);
    const again = post(codes(2, 'E'));
    await waitFor(() => held.length === 3);
    held[2]?.();
    expect((await again).statusCode).toBe(202);
    expect(rows().map((r) => String(r.raw))).toEqual(['A0', 'A1', 'A2', 'C0', 'E0', 'E1']);
  });

  it('answers 503 naming the reads stored when the buffer refuses a large request part-way', async () => {
    const limit = 600;
    const partial = new Intake({
      store,
      mapping: mappingContext(parseConfigText(YAML(), 'test.yaml')),
      logger: silentLogger(),
      gate: {
        admit: (scans) =>
          store.reports.totals().pendingScans + scans > limit ? 'quota reached' : undefined,
        commitFailed: () => {},
        commitSucceeded: () => {},
      },
    });
    partial.open();
    try {
      await buildServer({ sink: partial, maxReads: 2000, maxBodyBytes: 100_000 });
      const res = await post(Array.from({ length: 1000 }, (_, i) => ({ code: `PART-${i}` })));
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('5');
      const stored = rows().length;
      expect(stored).toBeGreaterThan(0);
      expect(stored).toBeLessThanOrEqual(limit);
      expect(res.json()).toMatchObject({ statusCode: 503, stored });
      // The stored reads are the request's first ones, in order: the sender resends from `stored`.
      expect(rows().map((r) => String(r.raw))).toEqual(
        Array.from({ length: stored }, (_, i) => `PART-${i}`),
      );
    } finally {
      partial.close();
    }
  });
});

describe('HTTP ingest input in the running gateway (real socket)', () => {
  let gateway: App | undefined;
  afterEach(async () => {
    await gateway?.stop();
    gateway = undefined;
  });

  it('serves POST /api/v1/reads on the local server, token from the environment, reads in the buffer', async () => {
    const file = join(dir, 'config.yaml');
    const yaml = YAML().replace(
      'inputs:',
      `buffer: { path: ${join(dir, 'gw.db')} }\nhttp: { listen: 127.0.0.1:0 }\ndelivery: { maxBatchDelayMs: 60000 }\ninputs:`,
    );
    await writeFile(file, yaml);
    const api = {
      uploadScans: async () => ({ requestId: 'r-1' }),
      requestPresignedUpload: async () => ({ url: 'http://127.0.0.1:9/x', requestId: 'r-2' }),
      putPresigned: async () => undefined,
      getScanStatus: async (requestId: string) => ({ state: 'Success', requestId }),
    };
    gateway = buildApp(
      { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
      { logger: silentLogger(), api, env: { SCAN_GATEWAY_INGEST_TOKEN: TOKEN } },
    );
    await gateway.start();
    const url = `${gateway.httpUrl}${INGEST_PATH}`;
    const ok = await fetch(url, {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: JSON.stringify([{ code: 'SOCK-1' }, { code: 'SOCK-2' }]),
    });
    expect(ok.status).toBe(202);
    expect(await ok.json()).toEqual({
      accepted: 2,
      scans: 2,
      noReads: 0,
      duplicates: 0,
      rejected: [],
    });
    const denied = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"code":"X"}',
    });
    expect(denied.status).toBe(401);
    const health = (await (await fetch(`${gateway.httpUrl}/healthz`)).json()) as {
      inputs: { id: string; state: string }[];
    };
    expect(health.inputs).toContainEqual(expect.objectContaining({ id: 'mes', state: 'up' }));
    await gateway.stop();
    gateway = undefined;
    const db = new Database(join(dir, 'gw.db'), { readonly: true });
    try {
      expect(
        db
          .prepare(`SELECT raw FROM reads WHERE input_id = 'mes' ORDER BY id`)
          .pluck()
          .all()
          .map(String),
      ).toEqual(['SOCK-1', 'SOCK-2']);
    } finally {
      db.close();
    }
  });

  it('refuses to start with a token shorter than 16 characters, naming the input and the source', async () => {
    const file = join(dir, 'config.yaml');
    const yaml = YAML().replace(
      'inputs:',
      `buffer: { path: ${join(dir, 'gw3.db')} }\nhttp: { listen: 127.0.0.1:0 }\ninputs:`,
    );
    gateway = buildApp(
      { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
      { logger: silentLogger(), env: { SCAN_GATEWAY_INGEST_TOKEN: 'fifteen-chars-x' } },
    );
    const err = await gateway.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isGatewayError(err, 'SCANGW_E_SECRET')).toBe(true);
    expect((err as Error).message).toBe(
      'input mes: the ingest token from the environment variable SCAN_GATEWAY_INGEST_TOKEN is shorter than 16 characters; make one with: openssl rand -hex 32',
    );
  });

  it('refuses to start without a token', async () => {
    const file = join(dir, 'config.yaml');
    const yaml = YAML().replace(
      'inputs:',
      `buffer: { path: ${join(dir, 'gw2.db')} }\nhttp: { listen: 127.0.0.1:0 }\ninputs:`,
    );
    gateway = buildApp(
      { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
      { logger: silentLogger(), env: {} },
    );
    const err = await gateway.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isGatewayError(err, 'SCANGW_E_SECRET')).toBe(true);
    expect((err as Error).message).toMatch(/SCAN_GATEWAY_INGEST_TOKEN/);
  });
});
