import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { CHROMIUM_ARGS, chromiumPath } from '../helpers/chromium.js';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { freePort } from '../helpers/ports.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
/**
 * The screenshots of docs/operations.md (sections 10 and 11): written to test-artifacts/ on every
 * run, and into docs/images/ with UPDATE_DOC_IMAGES=1 (so a test run leaves the tracked files alone).
 */
const IMAGES = join(
  PACKAGE_ROOT,
  process.env.UPDATE_DOC_IMAGES === '1' ? 'docs/images' : 'test-artifacts',
);

/**
 * The station screen in headless Chromium against the compiled daemon: a scanner on a
 * real TCP connection, the sandbox as the service. A read must show within 1 s (the
 * promise to the operator), a refused read with its reason in plain words, and the stalled banner
 * once the service is gone.
 */
describe('station screen in headless Chromium', () => {
  let sandbox: RunningSandbox;
  let gateway: GatewayProcess | undefined;
  let context: BrowserContext | undefined;
  let scanner: Socket | undefined;
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    const executablePath = chromiumPath();
    mkdirSync(IMAGES, { recursive: true });
    sandbox = await startSandbox({ port: 0, processingDelayMs: 50 });
    const dir = mkdtempSync(join(tmpdir(), 'sg-station-'));
    mkdirSync(join(dir, 'in'));
    const port = await freePort();
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: hall-3, timezone: Europe/Berlin, shifts: [{ name: early, start: "06:00" }, { name: late, start: "14:00" }, { name: night, start: "22:00" }] }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 50, statusPollMs: 100, statusPollMaxMs: 300, retryBaseMs: 100, retryMaxMs: 500 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs:
  - { id: eol-scanner, type: tcp, mode: server, host: 127.0.0.1, port: ${port}, dcp: EOL-3 }
rules:
  - { name: packs, inputs: [eol-scanner], match: { regex: "^PK-\\\\d+$" } }
`,
    );
    gateway = await startGateway(config, { SCAN_GATEWAY_CLIENT_SECRET: SECRET }, dir);
    scanner = connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) =>
      scanner!.once('connect', resolve).once('error', reject),
    );
    context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'sg-chromium-')), {
      executablePath,
      args: CHROMIUM_ARGS,
      headless: true,
      viewport: { width: 1024, height: 600 },
    });
  }, 60_000);
  afterAll(async () => {
    scanner?.destroy();
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
    await page.goto(`${gateway!.httpUrl}/station/EOL-3`);
    await expect.poll(() => page.locator('#conn').textContent(), { timeout: 30_000 }).toBe('live');
    return page;
  }

  // Run in the browser (the test's own types have no DOM): the computed font size in px, and the page's width.
  type Dom = {
    getComputedStyle(el: unknown): { fontSize: string };
    document: { documentElement: { scrollWidth: number } };
  };
  const px = (page: Page, selector: string) =>
    page
      .locator(selector)
      .first()
      .evaluate((el) => parseFloat((globalThis as unknown as Dom).getComputedStyle(el).fontSize));
  const pageWidth = (page: Page) =>
    page.evaluate(() => (globalThis as unknown as Dom).document.documentElement.scrollWidth);

  it(
    'shows a scan as it is read, a refused read with its reason, and the stalled banner when the service is gone',
    { timeout: 60_000 },
    async () => {
      const page = await open();
      expect(await page.locator('#last .verdict').textContent()).toBe('WAITING');

      // How soon the scan shows is printed at the end, not bounded: a loaded machine stretches it.
      const sentAt = Date.now();
      scanner!.write('PK-000815\r');
      await expect
        .poll(() => page.locator('#last .ref').textContent(), { timeout: 30_000, interval: 20 })
        .toBe('PK-000815');
      const shownMs = Date.now() - sentAt;
      expect(await page.locator('#last .verdict').textContent()).toBe('TAKEN');
      expect(await page.locator('#count-taken').textContent()).toBe('1');

      scanner!.write('XYZ-1\r');
      await expect
        .poll(() => page.locator('#last .verdict').textContent(), { timeout: 30_000, interval: 20 })
        .toBe('REFUSED');
      expect(await page.locator('#last .ref').textContent()).toBe('XYZ-1');
      expect(await page.locator('#last .words').textContent()).toBe(
        'This code is not expected at this station',
      );
      expect(await page.locator('#last .hint').textContent()).toMatch(
        /right item for this station/,
      );
      expect(await page.locator('#last .meta').textContent()).toMatch(
        /no rule matched the read from input eol-scanner \(rules tried: packs\)/,
      );
      expect(await page.locator('#count-refused').textContent()).toBe('1');
      expect(await page.locator('#reads li').count()).toBe(2);

      // Readable at 2 m on the 1024×600 panel: measured, not assumed.
      expect(await px(page, '#last .ref')).toBeGreaterThanOrEqual(48);
      expect(await px(page, '#last .verdict')).toBeGreaterThanOrEqual(48);
      expect(await px(page, '#last .words')).toBeGreaterThanOrEqual(32);
      expect(await px(page, '#count-taken')).toBeGreaterThanOrEqual(36);
      expect(await px(page, '#reads li')).toBeGreaterThanOrEqual(20);
      // Nothing scrolls sideways on the panel.
      expect(await pageWidth(page)).toBeLessThanOrEqual(1024);
      await page.screenshot({ path: join(IMAGES, 'station-1024x600.png') });

      // The service goes away: the next scan is kept, and the screen says so.
      expect(await page.locator('#stalled').count()).toBe(0);
      await sandbox.close();
      scanner!.write('PK-000816\r');
      await expect
        .poll(() => page.locator('#last .ref').textContent(), { timeout: 30_000, interval: 20 })
        .toBe('PK-000816');
      await expect
        .poll(() => page.locator('#stalled').count(), { timeout: 30_000, interval: 100 })
        .toBe(1);
      expect(await page.locator('#stalled').textContent()).toMatch(
        /^The gateway cannot reach the service\. Scans are kept safely \(1 waiting\)/,
      );

      // A phone beside the scanner.
      await page.setViewportSize({ width: 400, height: 900 });
      expect(await px(page, '#last .ref')).toBeGreaterThanOrEqual(40);
      expect(await px(page, '#last .verdict')).toBeGreaterThanOrEqual(40);
      expect(await px(page, '#stalled')).toBeGreaterThanOrEqual(20);
      expect(await pageWidth(page)).toBeLessThanOrEqual(400);
      await page.screenshot({ path: join(IMAGES, 'station-400x900.png') });

      // A second screen opened now starts from the snapshot: the last reads, the counts, the banner.
      const second = await open();
      expect(await second.locator('#reads li').count()).toBe(3);
      expect(await second.locator('#stalled').count()).toBe(1);
      expect(consoleErrors).toEqual([]);
      console.log(`station screen: scan shown ${shownMs} ms after the scanner sent it`);
    },
  );
  it(
    'the health page answers "what happened to this item?" from its search box',
    { timeout: 120_000 },
    async () => {
      const page = await context!.newPage();
      page.on('pageerror', (e) => consoleErrors.push(String(e)));
      await page.goto(`${gateway!.httpUrl}/`);
      await page.locator('#lookup-ref').fill('PK-00081');
      await page.getByRole('button', { name: 'Look up' }).click();
      // No exact match: the references starting with it, each a link to its trace.
      await expect
        .poll(() => page.locator('#lookup-result').textContent(), { timeout: 30_000 })
        .toMatch(/PK-00081 is not in the buffer/);
      await page.locator('#lookup-result a[data-item="PK-000815"]').click();
      await expect
        .poll(() => page.locator('#lookup-result h3').first().textContent(), { timeout: 30_000 })
        .toBe('PK-000815');
      const row = page.locator('#lookup-result tbody tr').first();
      expect(await row.textContent()).toMatch(
        /EOL-3.*endOfProcess.*product PACK-A.*eol-scanner.*PK-000815.*direct.*delivered.*Success/,
      );
      await page.setViewportSize({ width: 1280, height: 800 });
      await page.locator('#item').screenshot({ path: join(IMAGES, 'item-lookup.png') });
      expect(consoleErrors).toEqual([]);
    },
  );
});
