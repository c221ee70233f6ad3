import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config/load.js';
import { STATION_MAX_STREAMS } from '../../src/health/station.js';
import type { InputAdapter, IntakeSink } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const READ_TOKEN = 'station-read-token-0123456789';
const AUTH = { authorization: `Bearer ${READ_TOKEN}` };

/** An open event stream: everything received so far, and how to end it. */
interface Stream {
  status: number;
  headers: IncomingMessage['headers'];
  text: () => string;
  ended: () => boolean;
  close: () => void;
}

function openStream(url: string, headers: Record<string, string> = AUTH): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { headers: { accept: 'text/event-stream', ...headers } },
      (res) => {
        let body = '';
        let ended = false;
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => (ended = true));
        res.on('close', () => (ended = true));
        res.on('error', () => (ended = true));
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text: () => body,
          ended: () => ended,
          close: () => req.destroy(),
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** The data of every `event: <name>` in an event stream's text, parsed. */
function events(text: string, name: string): Record<string, unknown>[] {
  return text
    .split('\n\n')
    .filter((block) => block.startsWith(`event: ${name}\n`))
    .map((block) => JSON.parse(block.split('\ndata: ')[1]!) as Record<string, unknown>);
}

/**
 * The station screen's server side on the real app: read token, unknown stations, the
 * live events of a real intake, the cap on streams, heartbeats against the idle timeout, and a stop
 * with screens open.
 */
describe('station screen: routes and event stream', () => {
  let sandbox: RunningSandbox;
  let app: App;
  let sink: IntakeSink | undefined;
  const read = (text: string, inputId = 'eol-scanner') =>
    sink!.submit([
      { kind: 'read', read: { inputId, raw: Buffer.from(text), receivedAt: new Date() } },
    ]);

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 20 });
    const dir = mkdtempSync(join(tmpdir(), 'sg-station-int-'));
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      `site: { id: hall-3, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60 }
http: { listen: 127.0.0.1:0, limits: { idleTimeoutMs: 1000, maxStationStreamsPerClient: 32 } }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: eol-scanner, type: files, dir: ${join(dir, 'in')}, dcp: EOL-3 }
rules:
  - { name: packs, inputs: [eol-scanner], match: { regex: "^PK-" } }
`,
    );
    app = buildApp(
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
      {
        logger: silentLogger(),
        readToken: READ_TOKEN,
        createInput: (config, s): InputAdapter => {
          sink = s;
          return {
            id: config.id,
            type: 'scripted',
            start: async () => {},
            stop: async () => {},
            status: () => ({ id: config.id, type: 'scripted', state: 'up', source: 'script' }),
          };
        },
      },
    );
    await app.start();
  });
  afterAll(async () => {
    await app?.stop();
    await sandbox?.close();
  });

  it('asks for the read token on the screen, its events and the item routes, like the status', async () => {
    for (const path of [
      '/station/EOL-3',
      '/station/EOL-3/events',
      '/api/v1/items/PK-1',
      '/api/v1/items?prefix=PK',
    ]) {
      const res = await fetch(`${app.httpUrl}${path}`);
      expect(res.status, path).toBe(401);
      await res.body?.cancel();
    }
    const page = await fetch(`${app.httpUrl}/station/EOL-3`, { headers: AUTH });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toMatch(
      /^default-src 'none'; script-src 'sha256-[^']+'; style-src 'sha256-[^']+'; connect-src 'self'/,
    );
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    const html = await page.text();
    expect(html).not.toMatch(/<script src|<link rel="stylesheet"|https?:\/\/(?!127)/);

    const unknown = await fetch(`${app.httpUrl}/station/NOPE`, { headers: AUTH });
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toMatch(/No DCP NOPE[\s\S]*EOL-3[\s\S]*GI-01/);
  });

  it(
    'streams a snapshot, then each read of the station as it is committed, with plain words for a refusal',
    { timeout: 120_000 },
    async () => {
      const stream = await openStream(`${app.httpUrl}/station/EOL-3/events`);
      try {
        expect(stream.status).toBe(200);
        expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
        await waitFor(() => events(stream.text(), 'snapshot').length === 1, {
          what: 'the snapshot',
        });
        expect(events(stream.text(), 'snapshot')[0]).toMatchObject({
          dcp: { key: 'EOL-3', kind: 'endOfProcess' },
          site: 'hall-3',
          last: [],
        });

        await read('PK-000815');
        await read('BOX-1');
        await waitFor(() => events(stream.text(), 'read').length === 2, { what: 'two reads' });
        const [taken, refused] = events(stream.text(), 'read');
        expect(taken).toMatchObject({
          verdict: 'taken',
          text: 'PK-000815',
          inputId: 'eol-scanner',
        });
        expect(refused).toMatchObject({
          verdict: 'refused',
          text: 'BOX-1',
          words: 'This code is not expected at this station',
          reason: 'no rule matched the read from input eol-scanner (rules tried: packs)',
        });

        // A screen opened later starts from the buffer: counts of the shift and the last reads.
        const later = await openStream(`${app.httpUrl}/station/EOL-3/events`);
        await waitFor(() => events(later.text(), 'snapshot').length === 1, {
          what: 'the second snapshot',
        });
        expect(events(later.text(), 'snapshot')[0]).toMatchObject({
          counts: { taken: 1, refused: 1 },
          last: [{ text: 'BOX-1' }, { text: 'PK-000815' }],
        });
        later.close();
        // Another station's screen does not get them.
        const other = await openStream(`${app.httpUrl}/station/GI-01/events`);
        await read('PK-000816');
        await waitFor(() => events(stream.text(), 'read').length === 3, { what: 'the third read' });
        expect(events(other.text(), 'read')).toEqual([]);
        other.close();
      } finally {
        stream.close();
      }
    },
  );

  it(
    'keeps a quiet stream open past the idle timeout with heartbeats',
    { timeout: 60_000 },
    async () => {
      const stream = await openStream(`${app.httpUrl}/station/GI-01/events`);
      try {
        // idleTimeoutMs is 1000: the heartbeat comes every 500 ms. Three of them span more than
        // the idle timeout on the server's own clock, however slow the machine: waited for, not
        // counted after a fixed sleep a loaded machine may not fill.
        await waitFor(() => stream.text().split(': keep-alive\n\n').length - 1 >= 3, {
          what: 'three heartbeats',
        });
        expect(stream.ended()).toBe(false);
      } finally {
        stream.close();
      }
    },
  );

  // Every stream comes from 127.0.0.1 here, so this address may hold all of them: the share per
  // address is test/integration/listener-fairness.test.ts's.
  it(
    `refuses stream ${STATION_MAX_STREAMS + 1} with 503, and a stop ends every open stream at once`,
    { timeout: 120_000 },
    async () => {
      // The streams of the tests above are gone on the server's side too before the count starts.
      const gauge = async () =>
        /scan_gateway_station_streams (\d+)/.exec(
          await (await fetch(`${app.httpUrl}/metrics`, { headers: AUTH })).text(),
        )?.[1];
      await waitFor(async () => (await gauge()) === '0', { what: 'no station stream open' });
      const streams = await Promise.all(
        Array.from({ length: STATION_MAX_STREAMS }, () =>
          openStream(`${app.httpUrl}/station/EOL-3/events`),
        ),
      );
      expect(streams.map((s) => s.status)).toEqual(streams.map(() => 200));
      const extra = await fetch(`${app.httpUrl}/station/EOL-3/events`, { headers: AUTH });
      expect(extra.status).toBe(503);
      expect(extra.headers.get('retry-after')).toBe('30');
      expect(((await extra.json()) as { message: string }).message).toMatch(
        /too many station screens are open/,
      );
      const metrics = await (await fetch(`${app.httpUrl}/metrics`, { headers: AUTH })).text();
      expect(metrics).toMatch(/scan_gateway_http_refused_total\{reason="station_streams"\} 1/);
      expect(metrics).toMatch(new RegExp(`scan_gateway_station_streams ${STATION_MAX_STREAMS}\n`));

      // The stop itself is not timed (a hang is caught by the test's timeout).
      await app.stop();
      await waitFor(() => streams.every((s) => s.ended()), {
        what: 'every stream ended by the stop',
      });
    },
  );
});
