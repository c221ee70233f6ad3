import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { CHROMIUM_ARGS, chromiumPath } from '../helpers/chromium.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const ADMIN_TOKEN = 'browser-test-admin-token-5e2b';
const ARTIFACTS = join(PACKAGE_ROOT, 'test-artifacts');
/** The page refreshes every 5 s: give what it shows up to two refreshes and a bit. */
const POLL = { timeout: 15_000, interval: 200 };

function writeConfig(dir: string, sandboxUrl: string): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: hall-3-goods-in, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 200, statusPollMs: 200, statusPollMaxMs: 500 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
  - { key: EOL-9, kind: endOfProcess, productModelKey: PACK-A }
inputs:
  - { id: goods-in-pc, type: files, dir: ${join(dir, 'goods-in')}, format: csv, barcodeColumn: barcode, timeColumn: read_at, dcp: GI-01, stableMs: 100 }
  - { id: eol-station-9, type: files, dir: ${join(dir, 'eol')}, format: lines, dcp: EOL-9, stableMs: 100 }
`,
  );
  return file;
}

describe('health page in headless Chromium', () => {
  let sandbox: RunningSandbox;
  let gateway: GatewayProcess | undefined;
  let context: BrowserContext | undefined;
  let dir: string;
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    const executablePath = chromiumPath();
    sandbox = await startSandbox({ port: 0, processingDelayMs: 500 });
    dir = mkdtempSync(join(tmpdir(), 'sg-page-'));
    mkdirSync(join(dir, 'goods-in'));
    mkdirSync(join(dir, 'eol'));
    gateway = await startGateway(
      writeConfig(dir, sandbox.url),
      { SCAN_GATEWAY_CLIENT_SECRET: SECRET, SCAN_GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN },
      dir,
    );
    context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'sg-chromium-')), {
      executablePath,
      args: CHROMIUM_ARGS,
      headless: true,
      viewport: { width: 1280, height: 900 },
    });
  });
  afterAll(async () => {
    await context?.close();
    await gateway?.stop();
    await sandbox?.close();
  });

  async function open(): Promise<Page> {
    const page = await context!.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    await page.goto(`${gateway!.httpUrl}/`);
    return page;
  }

  it('shows a dropped file as a batch reaching Success, and a failed scan with its reason', async () => {
    const page = await open();
    await expect.poll(() => page.locator('.banner .state').textContent(), POLL).toBe('OK');
    expect(await page.title()).toBe('OK · scan-gateway · hall-3-goods-in');
    const batches = page.locator('section.card', {
      has: page.getByRole('heading', { name: 'Last batches' }),
    });
    await expect.poll(() => batches.textContent(), POLL).toContain('No batches yet.');

    // The page refreshes itself: no reload from here on.
    writeFileSync(
      join(dir, 'goods-in', 'export.csv'),
      'barcode,read_at\nCELL-0001,2026-11-18T07:00:00+01:00\nCELL-0002,2026-11-18T07:00:01+01:00\n',
    );
    await batches.locator('.pill', { hasText: 'Success' }).waitFor({ timeout: 30_000 });
    const inputs = page.locator('section.card', {
      has: page.getByRole('heading', { name: 'Inputs' }),
    });
    await expect
      .poll(
        () =>
          inputs
            .locator('tr', { hasText: 'goods-in-pc' })
            .locator('td[data-label="Scans"]')
            .textContent(),
        POLL,
      )
      .toBe('2');

    // EOL-9 is unknown to the sandbox: the service fails the scan with the reason "Invalid DCP".
    writeFileSync(join(dir, 'eol', 'line.txt'), 'PACK-<i>77</i>\n');
    const problems = page.locator('section.card', {
      has: page.getByRole('heading', { name: /rejections and upstream failures/ }),
    });
    const row = problems.locator('tr', { hasText: 'Invalid DCP' });
    await row.waitFor({ timeout: 30_000 });
    await expect.poll(() => row.textContent(), POLL).toContain('eol-station-9');
    await expect.poll(() => row.locator('code.raw').textContent(), POLL).toBe('PACK-<i>77</i>'); // shown as text, not as markup
    await expect.poll(() => batches.locator('.pill', { hasText: 'Failed' }).count(), POLL).toBe(1);
    await expect.poll(() => page.locator('.tile.bad .tile-v').textContent(), POLL).toBe('1');

    // Admin buttons, with the token typed in.
    await page.getByPlaceholder('Admin token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Pause delivery' }).click();
    await expect
      .poll(() => page.locator('#admin-result').textContent(), POLL)
      .toContain('delivery paused');
    const delivery = page.locator('section.card', {
      has: page.getByRole('heading', { name: 'Delivery' }),
    });
    await expect.poll(() => delivery.locator('dd', { hasText: 'paused' }).count(), POLL).toBe(1);
    // A forgotten pause must show in monitoring, not only on the page.
    const health = (await (await fetch(`${gateway!.httpUrl}/healthz`)).json()) as {
      status: string;
      reasons: string[];
    };
    expect(health.status).toBe('degraded');
    expect(health.reasons).toContain(
      'Delivery is paused by an operator: nothing is uploaded until it is resumed.',
    );
    await page.getByRole('button', { name: 'Resume delivery' }).click();
    await expect
      .poll(() => page.locator('#admin-result').textContent(), POLL)
      .toContain('delivery resumed');
    await expect.poll(() => delivery.locator('.pill', { hasText: 'paused' }).count(), POLL).toBe(0);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'health-page.png'), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(ARTIFACTS, 'health-page-phone.png'), fullPage: true });
    expect(consoleErrors).toEqual([]);
  });
});
