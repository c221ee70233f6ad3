import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { CHROMIUM_ARGS, chromiumPath } from '../helpers/chromium.js';

/**
 * The read token in a real browser against the real daemon: Chromium answers the Basic challenge of
 * the page with the token as password and keeps it for the page's own refreshes of
 * `api/v1/status`, so the page works as before; without it the page is 401.
 */

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const READ_TOKEN = 'browser-read-token-7f3a9c1d';

describe('health page behind the read token, in headless Chromium', () => {
  let sandbox: RunningSandbox;
  let gateway: GatewayProcess | undefined;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    chromiumPath();
    sandbox = await startSandbox({ port: 0 });
    const dir = mkdtempSync(join(tmpdir(), 'sg-read-'));
    const file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      `site: { id: hall-3, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs: []
`,
    );
    gateway = await startGateway(
      file,
      { SCAN_GATEWAY_CLIENT_SECRET: SECRET, SCAN_GATEWAY_READ_TOKEN: READ_TOKEN },
      dir,
    );
  });
  afterAll(async () => {
    for (const c of contexts) await c.close();
    await gateway?.stop();
    await sandbox?.close();
  });

  const browser = async (httpCredentials?: { username: string; password: string }) => {
    const context = await chromium.launchPersistentContext(
      mkdtempSync(join(tmpdir(), 'sg-chromium-')),
      {
        executablePath: chromiumPath(),
        args: CHROMIUM_ARGS,
        headless: true,
        ...(httpCredentials ? { httpCredentials } : {}),
      },
    );
    contexts.push(context);
    return context;
  };

  it('asks for the token; with it the page loads and refreshes itself from api/v1/status', async () => {
    const context = await browser({ username: 'operator', password: READ_TOKEN });
    const page = await context.newPage();
    const refresh = page.waitForResponse((r) => r.url().endsWith('/api/v1/status'), {
      timeout: 15_000,
    });
    const answer = await page.goto(`${gateway!.httpUrl}/`);
    expect(answer?.status()).toBe(200);
    expect((await refresh).status()).toBe(200);
    await expect
      .poll(() => page.locator('.banner .state').textContent(), { timeout: 30_000 })
      .toMatch(/OK|DEGRADED/);
    expect(gateway!.output()).not.toContain(READ_TOKEN);
  });

  it('answers 401 with a Basic challenge without it (what makes a browser ask)', async () => {
    const answer = await fetch(`${gateway!.httpUrl}/`);
    expect(answer.status).toBe(401);
    expect(answer.headers.get('www-authenticate')).toContain('Basic realm="scan-gateway"');
    const wrong = await fetch(`${gateway!.httpUrl}/`, {
      headers: { authorization: `Basic ${Buffer.from('operator:nope').toString('base64')}` },
    });
    expect(wrong.status).toBe(401);
  });
});
