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
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
/** The screenshot of docs/operations.md section 10: test-artifacts/ on every run, docs/images/ with UPDATE_DOC_IMAGES=1. */
const IMAGES = join(
  PACKAGE_ROOT,
  process.env.UPDATE_DOC_IMAGES === '1' ? 'docs/images' : 'test-artifacts',
);
const GS = '\u001d';
const PACK = 'https://id.gs1.org/01/09521234543213/21/C2611030001234';

/**
 * The health page's search box in headless Chromium against the compiled daemon: a GS1 scanner on
 * a real TCP connection sends packs of one lot (GS1 DataMatrix with `]d2`, one as GS1-128 with
 * `]C1`), the rule sends them under their canonical GS1 reference. A person types what is on the
 * label, the raw read as the page shows it, or the lot.
 */
describe('the health page finds an item by its GS1 label', () => {
  let sandbox: RunningSandbox;
  let gateway: GatewayProcess | undefined;
  let context: BrowserContext | undefined;
  let scanner: Socket | undefined;
  const errors: string[] = [];

  beforeAll(async () => {
    const executablePath = chromiumPath();
    mkdirSync(IMAGES, { recursive: true });
    sandbox = await startSandbox({ port: 0, processingDelayMs: 20 });
    const dir = mkdtempSync(join(tmpdir(), 'sg-gs1-page-'));
    const port = await freePort();
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: hall-3, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 50, statusPollMs: 100, statusPollMaxMs: 300, retryBaseMs: 100, retryMaxMs: 500 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: gi-scanner, type: tcp, mode: server, host: 127.0.0.1, port: ${port}, dcp: GI-01 }
rules:
  - name: gs1-item
    match: { gs1: true }
    reference: { gs1: canonical }
    attributes: { batch: { ai: '10' }, expiry: { ai: '17', as: date } }
`,
    );
    gateway = await startGateway(config, { SCAN_GATEWAY_CLIENT_SECRET: SECRET }, dir);
    scanner = connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) =>
      scanner!.once('connect', resolve).once('error', reject),
    );
    for (const sn of ['C2611030001233', 'C2611030001235'])
      scanner.write(`]d2010952123454321310B2611-03${GS}17281231${GS}21${sn}\r`);
    scanner.write(`]C1010952123454321321C2611030001234${GS}10B2611-03\r`);
    const url = gateway.httpUrl;
    await waitFor(
      async () =>
        (
          (await (await fetch(`${url}/api/v1/status`)).json()) as {
            buffer: { scans: { delivered?: number } };
          }
        ).buffer.scans.delivered === 3,
      {
        timeoutMs: 30_000,
        what: '3 packs delivered',
      },
    );
    context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'sg-chromium-')), {
      executablePath,
      args: CHROMIUM_ARGS,
      headless: true,
      viewport: { width: 1280, height: 800 },
    });
  }, 60_000);
  afterAll(async () => {
    scanner?.destroy();
    await context?.close();
    await gateway?.stop();
    await sandbox?.close();
  });

  async function ask(page: Page, query: string): Promise<string> {
    await page.locator('#lookup-ref').fill(query);
    await page.getByRole('button', { name: 'Look up' }).click();
    await expect
      .poll(() => page.locator('#lookup-result').textContent(), { timeout: 30_000 })
      .not.toMatch(/^Looking up/);
    return (await page.locator('#lookup-result').textContent()) ?? '';
  }

  it(
    'traces the pack by the line under its barcode and by its raw read; lists the lot',
    { timeout: 120_000 },
    async () => {
      const page = await context!.newPage();
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.goto(`${gateway!.httpUrl}/`);

      for (const form of [
        '(01)09521234543213(10)B2611-03(21)C2611030001234',
        ']C1010952123454321321C2611030001234<GS>10B2611-03',
        PACK,
      ]) {
        const text = await ask(page, form);
        expect(await page.locator('#lookup-result h3').first().textContent(), form).toBe(PACK);
        expect(text, form).toContain(
          'Canonical GS1 reference: https://id.gs1.org/01/09521234543213/21/C2611030001234 · identified by AI 01 (GTIN), AI 21 (SERIAL)',
        );
        expect(await page.locator('#lookup-result tbody tr').count(), form).toBe(1);
      }

      const lot = await ask(page, 'B2611-03');
      expect(lot).toContain('B2611-03 as AI 10 (BATCH/LOT): 3 scan(s), 3 item(s) listed');
      expect(await page.locator('#lookup-result li a[data-item]').count()).toBe(3);
      await page.locator('#item').screenshot({ path: join(IMAGES, 'item-lookup-gs1.png') });

      // Each item of the lot links to its own trace.
      await page.locator(`#lookup-result a[data-item="${PACK}"]`).click();
      await expect
        .poll(() => page.locator('#lookup-result h3').first().textContent(), { timeout: 30_000 })
        .toBe(PACK);
      expect(errors).toEqual([]);
    },
  );
});
