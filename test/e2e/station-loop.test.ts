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
const ADMIN = 'admin-token-of-the-line-lead';
/** docs/operations.md section 11's screenshot: test-artifacts/ on every run, docs/images/ with UPDATE_DOC_IMAGES=1. */
const IMAGES = join(
  PACKAGE_ROOT,
  process.env.UPDATE_DOC_IMAGES === '1' ? 'docs/images' : 'test-artifacts',
);

/**
 * The station loop in headless Chromium against the compiled daemon: a handheld on a real TCP
 * connection at ST-20, modules of exactly 12 cells (`onIncomplete: refuse`). The screen shows the
 * open module's "3 of 12" as cells come in, and the refused next label with why.
 */
describe('station loop in headless Chromium', () => {
  let sandbox: RunningSandbox;
  let gateway: GatewayProcess | undefined;
  let context: BrowserContext | undefined;
  let scanner: Socket | undefined;

  beforeAll(async () => {
    const executablePath = chromiumPath();
    mkdirSync(IMAGES, { recursive: true });
    sandbox = await startSandbox({ port: 0, processingDelayMs: 50 });
    const dir = mkdtempSync(join(tmpdir(), 'sg-station-loop-'));
    const port = await freePort();
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: line-2, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 50, statusPollMs: 100, statusPollMaxMs: 300 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: ST-20, kind: startOfProcess, productModelKey: MOD-12 }
inputs:
  - { id: st20, type: tcp, mode: server, host: 127.0.0.1, port: ${port}, dcp: ST-20 }
containers:
  - { name: module, open: { regex: "^MOD-" }, members: 12, onIncomplete: refuse }
rules:
  - { name: modules, match: { regex: "^MOD-" } }
  - { name: cells, match: { ais: ['01', '21'] }, reference: { ai: '21' }, requireContainer: module }
`,
    );
    gateway = await startGateway(
      config,
      { SCAN_GATEWAY_CLIENT_SECRET: SECRET, SCAN_GATEWAY_ADMIN_TOKEN: ADMIN },
      dir,
    );
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

  type Dom = { document: { documentElement: { scrollWidth: number } } };

  it('shows "3 of 12" and the refused next label with why', { timeout: 60_000 }, async () => {
    const page: Page = await context!.newPage();
    await page.goto(`${gateway!.httpUrl}/station/ST-20`);
    await expect.poll(() => page.locator('#conn').textContent(), { timeout: 30_000 }).toBe('live');
    const fill = () => page.locator('#containers .fill').first().textContent();

    scanner!.write('MOD-L2-000124\r');
    await expect.poll(fill, { timeout: 30_000, interval: 20 }).toBe('0 of 12');
    for (let i = 1; i <= 3; i++) {
      scanner!.write(`(01)09521234543213(21)C000${i}(10)L1\r`);
      await expect.poll(fill, { timeout: 30_000, interval: 20 }).toBe(`${i} of 12`);
    }
    scanner!.write('MOD-L2-000125\r');
    await expect
      .poll(() => page.locator('#last .ref').textContent(), { timeout: 30_000, interval: 20 })
      .toBe('MOD-L2-000125');
    expect(await page.locator('#last .verdict').textContent()).toBe('REFUSED');
    expect(await page.locator('#last .words').textContent()).toBe(
      'MOD-L2-000124 has 3 of 12: finish it first',
    );
    expect(await page.locator('#containers .label').textContent()).toBe('MOD-L2-000124');
    expect(await fill()).toBe('3 of 12');
    expect(
      await page.evaluate(
        () => (globalThis as unknown as Dom).document.documentElement.scrollWidth,
      ),
    ).toBeLessThanOrEqual(1024);
    await page.screenshot({ path: join(IMAGES, 'station-loop-1024x600.png') });

    // The line lead closes the short module from the health page: token, name and why.
    const health = await context!.newPage();
    await health.goto(`${gateway!.httpUrl}/`);
    const close = health.locator('button[data-container="module"][data-abandon="false"]');
    await expect.poll(() => close.count(), { timeout: 30_000 }).toBe(1);
    await health.fill('#admin-token', ADMIN);
    await close.click();
    await expect
      .poll(() => health.locator('#admin-result').textContent(), { timeout: 30_000 })
      .toBe('Enter your name and why first (both are recorded).');
    await health.fill('#admin-by', 'Anna (line lead)');
    await health.fill('#admin-why', 'housing cracked');
    await close.click();
    await expect
      .poll(() => health.locator('#admin-result').textContent(), { timeout: 30_000 })
      .toBe('MOD-L2-000124 closed with 3 of 12 by Anna (line lead): housing cracked');
    await expect.poll(() => close.count(), { timeout: 30_000 }).toBe(0);
  });
});
