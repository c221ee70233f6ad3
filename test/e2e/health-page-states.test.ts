import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogueEntry } from '../../src/error-catalogue.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { CHROMIUM_ARGS, chromiumPath } from '../helpers/chromium.js';

// The health page as a shift supervisor sees it, in headless Chromium, in three states: healthy,
// upstream down, scans held (with a file refused beside). Each checks the visible words: the
// state, the sentence, the code and the what-to-do, and that no developer error text shows.

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
/** The page refreshes every 5 s: give what it shows up to two refreshes and a bit. */
const POLL = { timeout: 30_000, interval: 250 };

function writeConfig(dir: string, upstreamUrl: string, extra = ''): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: hall-3-goods-in, timezone: Europe/Berlin }
upstream: { baseUrl: ${upstreamUrl}, authUrl: ${upstreamUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 200, statusPollMs: 200, statusPollMaxMs: 500, retryBaseMs: 200, retryMaxMs: 1000 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: goods-in-pc, type: files, dir: ${join(dir, 'goods-in')}, format: csv, barcodeColumn: barcode, timeColumn: read_at, dcp: GI-01, stableMs: 100 }
${extra}`,
  );
  mkdirSync(join(dir, 'goods-in'), { recursive: true });
  return file;
}

/** A real upstream that issues tokens and refuses every upload with a 400 problem: batches are held. */
async function refusingUpstream(): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/oauth2/token') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            access_token: 'held-test-token',
            token_type: 'Bearer',
            expires_in: 3600,
          }),
        );
      } else if (req.method === 'POST' && req.url === '/api/trace/v3/scans') {
        res.writeHead(400, { 'content-type': 'application/problem+json' }).end(
          JSON.stringify({
            status: 400,
            title: 'Bad Request',
            detail: 'The scan batch is invalid: [0].dcpKey: unknown to this client',
          }),
        );
      } else {
        res
          .writeHead(404, { 'content-type': 'application/problem+json' })
          .end(JSON.stringify({ status: 404, title: 'Not Found' }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const csv = (...refs: string[]) =>
  `barcode,read_at\n${refs.map((r, i) => `${r},2026-11-18T07:00:0${i}+01:00`).join('\n')}\n`;

/** The what-to-do of `code` as the page shows it (Markdown marks rendered away). */
const hintText = (code: string) => catalogueEntry(code)!.whatToDo.replace(/[`*]/g, '');

describe('health page states in headless Chromium', () => {
  let context: BrowserContext | undefined;
  const gateways: GatewayProcess[] = [];
  const closers: (() => Promise<void>)[] = [];
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'sg-chromium-')), {
      executablePath: chromiumPath(),
      args: CHROMIUM_ARGS,
      headless: true,
      viewport: { width: 1280, height: 900 },
    });
  });
  afterAll(async () => {
    await context?.close();
    for (const g of gateways) await g.stop();
    for (const c of closers) await c();
  });

  async function open(url: string): Promise<Page> {
    const page = await context!.newPage();
    page.on('console', (m) => {
      // The page's own refresh of a gateway that is not answering is expected to log nothing.
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    await page.goto(`${url}/`);
    return page;
  }

  /** The visible words of the first problem in the banner for `code`. */
  async function problem(page: Page, code: string) {
    const item = page.locator('.banner li.problem', {
      has: page.locator('code.pcode', { hasText: code }),
    });
    await item.waitFor({ timeout: POLL.timeout });
    return {
      sentence: await item.locator('.sentence').innerText(),
      hint: await item.locator('.hint').innerText(),
      visible: await item.innerText(),
    };
  }

  it('healthy, then upstream down: the state, the sentence, the code and the hint; no developer text', async () => {
    const sandbox: RunningSandbox = await startSandbox({ port: 0, processingDelayMs: 200 });
    let sandboxOpen = true;
    closers.push(async () => {
      if (sandboxOpen) await sandbox.close();
    });
    const dir = mkdtempSync(join(tmpdir(), 'sg-states-'));
    const gateway = await startGateway(
      writeConfig(dir, sandbox.url),
      { SCAN_GATEWAY_CLIENT_SECRET: SECRET },
      dir,
    );
    gateways.push(gateway);
    const page = await open(gateway.httpUrl);

    // Healthy: two scans delivered.
    writeFileSync(join(dir, 'goods-in', 'a.csv'), csv('CELL-0001', 'CELL-0002'));
    const tile = (name: string) =>
      page.locator('.tile', {
        has: page.locator('.tile-k', { hasText: new RegExp(`^${name}$`, 'i') }),
      });
    const delivered = tile('Delivered').locator('.tile-v');
    await expect.poll(() => delivered.innerText(), POLL).toBe('2');
    await expect.poll(() => page.locator('.banner .state').innerText(), POLL).toBe('OK');
    expect(await page.locator('.banner .state-line').innerText()).toBe(
      'Every input is up and delivery is flowing.',
    );
    expect(await page.locator('.banner li.problem').count()).toBe(0);
    expect(await tile('Not yet delivered').innerText()).toContain('nothing waiting, nothing held');

    // Upstream down: the service is gone; a new file waits.
    await sandbox.close();
    sandboxOpen = false;
    writeFileSync(join(dir, 'goods-in', 'b.csv'), csv('CELL-0003'));
    await expect.poll(() => page.locator('.banner .state').innerText(), POLL).toBe('Degraded');
    const down = await problem(page, 'SCANGW_E_UPSTREAM_NETWORK');
    expect(down.sentence).toBe(
      'The upstream service cannot be reached, so nothing is uploaded. Scans wait safely in the buffer and are sent when it works again.',
    );
    expect(down.hint).toBe(`What to do: ${hintText('SCANGW_E_UPSTREAM_NETWORK')}`);
    expect(await page.locator('.banner .state-line').innerText()).toBe(
      'Working, but something needs a look.',
    );
    await expect
      .poll(() => tile('Not yet delivered').innerText(), POLL)
      .toContain('1 waiting for delivery · 0 held');
    // What a person sees holds no developer text: the errno and the circuit stay in the folded details.
    const visible = await page.locator('main').innerText();
    expect(visible).not.toMatch(/ECONNREFUSED|fetch failed|circuit/i);
    expect(visible).toContain('technical detail');
    await page.locator('.banner li.problem details.tech summary').first().click();
    expect(await page.locator('.banner li.problem details.tech').first().innerText()).toMatch(
      /ECONNREFUSED|connect/,
    );
    expect(await page.title()).toBe('Degraded · scan-gateway · hall-3-goods-in');
    mkdirSync(join(PACKAGE_ROOT, 'test-artifacts'), { recursive: true });
    await page.screenshot({
      path: join(PACKAGE_ROOT, 'test-artifacts', 'health-page-upstream-down.png'),
      fullPage: true,
    });
  });

  it('scans held and a file refused: each problem in words, with its code and what to do', async () => {
    const upstream = await refusingUpstream();
    closers.push(upstream.close);
    const dir = mkdtempSync(join(tmpdir(), 'sg-states-held-'));
    const gateway = await startGateway(
      writeConfig(dir, upstream.url, 'productCheck: { enabled: false }\n'),
      { SCAN_GATEWAY_CLIENT_SECRET: SECRET },
      dir,
    );
    gateways.push(gateway);
    const page = await open(gateway.httpUrl);

    writeFileSync(join(dir, 'goods-in', 'a.csv'), csv('CELL-0101'));
    // A typical failed file: a CSV whose header has no barcode column goes to failed/.
    writeFileSync(
      join(dir, 'goods-in', 'export.csv'),
      'code,read_at\nCELL-0102,2026-11-18T07:00:00+01:00\n',
    );

    await expect.poll(() => page.locator('.banner .state').innerText(), POLL).toBe('Degraded');
    const held = await problem(page, 'SCANGW_H_SCANS_HELD');
    expect(held.sentence).toBe(
      '1 scan is held: the service refused its batch, so it is not delivered until someone replays it.',
    );
    expect(held.hint).toBe(`What to do: ${hintText('SCANGW_H_SCANS_HELD')}`);
    const file = await problem(page, 'SCANGW_H_FILES_REFUSED');
    expect(file.sentence).toBe(
      '1 file was refused in the last 60 minutes and moved to failed/; the latest: export.csv from input goods-in-pc.',
    );
    expect(file.hint).toBe(`What to do: ${hintText('SCANGW_H_FILES_REFUSED')}`);
    await expect
      .poll(() => page.locator('.tile', { hasText: 'Not yet delivered' }).innerText(), POLL)
      .toContain('0 waiting for delivery · 1 held');
    expect(await page.locator('main').innerText()).not.toContain(
      'Every input is up and delivery is flowing',
    );

    // The same on /healthz, for monitoring.
    const health = (await (await fetch(`${gateway.httpUrl}/healthz`)).json()) as {
      status: string;
      heldScans: number;
      filesRefusedLastHour: number;
      problems: { code: string }[];
    };
    expect(health).toMatchObject({ status: 'degraded', heldScans: 1, filesRefusedLastHour: 1 });
    expect(health.problems.map((p) => p.code).sort()).toEqual([
      'SCANGW_H_FILES_REFUSED',
      'SCANGW_H_SCANS_HELD',
    ]);

    mkdirSync(join(PACKAGE_ROOT, 'test-artifacts'), { recursive: true });
    await page.screenshot({
      path: join(PACKAGE_ROOT, 'test-artifacts', 'health-page-held.png'),
      fullPage: true,
    });
    expect(consoleErrors).toEqual([]);
  });
});
