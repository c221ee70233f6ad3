import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { MAIN_JS, startGateway } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Secrets never reach the logs: the daemon runs as a child process (as under systemd) with known
 * secrets, at log level trace, through every path that logs (start, token requests refused and
 * granted, upstream errors, resets and rate limits, admin calls with wrong, missing and right
 * tokens, configuration and secret errors, stop) and all it prints is searched for them.
 */
const CLIENT_SECRET = 'KNOWN-client-secret-7f3a9c2e51';
const WRONG_SECRET = 'KNOWN-wrong-secret-0b6d4e8a27';
const ADMIN_TOKEN = 'KNOWN-admin-token-4b1d8e6f0a2c';
const SECRETS = [CLIENT_SECRET, WRONG_SECRET, ADMIN_TOKEN];
/** An access token the sandbox issued (a JWT: base64url of `{"` starts with eyJ). */
const JWT = /eyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]+/;

function config(dir: string, sandboxUrl: string, extra = ''): string {
  const file = join(dir, 'config.yaml');
  mkdirSync(join(dir, 'inbox'), { recursive: true });
  writeFileSync(
    file,
    `site: { id: redaction, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: leak-test${extra} }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: auto, maxBatchScans: 20, maxBatchDelayMs: 50, statusPollMs: 100, statusPollMaxMs: 300, retryBaseMs: 50, retryMaxMs: 200, notFoundGraceMs: 1000 }
http: { listen: 127.0.0.1:0 }
log: { level: trace }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: lines, dcp: GI-01, stableMs: 50 }
`,
  );
  return file;
}

function expectNoSecret(output: string, where: string): void {
  for (const secret of SECRETS)
    expect(output.includes(secret), `${where} printed ${secret}`).toBe(false);
  expect(JWT.exec(output)?.[0], `${where} printed an access token`).toBeUndefined();
}

const admin = (url: string, action: string, authorization?: string) =>
  fetch(`${url}/api/v1/admin/${action}`, {
    method: 'POST',
    headers: authorization ? { authorization } : {},
  });

describe('no secret in any log line', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({
      port: 0,
      processingDelayMs: 50,
      tokenTtlSec: 2,
      // The product of the DCP below: the sandbox fails scans of a product the client does not have.
      clients: [
        {
          clientId: 'leak-test',
          clientSecret: CLIENT_SECRET,
          dcps: ['GI-01'],
          products: [{ key: 'PACK-A', name: 'Pack A' }],
        },
      ],
    });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it('while running: tokens, upstream faults, admin calls with wrong and right tokens, stop', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-redact-'));
    sandbox.setFaults({
      errorRate: 0.3,
      rateLimitRate: 0.1,
      retryAfterSec: 0,
      resetRate: 0.1,
      tokenErrorRate: 0.2,
      tokenResetRate: 0.1,
    });
    const gateway = await startGateway(
      config(dir, sandbox.url),
      { SCAN_GATEWAY_CLIENT_SECRET: CLIENT_SECRET, SCAN_GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN },
      dir,
    );
    try {
      writeFileSync(
        join(dir, 'inbox', 'a.txt'),
        Array.from({ length: 200 }, (_, i) => `CELL-${i}`).join('\n'),
      );
      for (const auth of [
        undefined,
        `Bearer ${CLIENT_SECRET}`,
        `Bearer ${ADMIN_TOKEN}x`,
        `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}`,
        ADMIN_TOKEN,
      ]) {
        expect((await admin(gateway.httpUrl, 'retry', auth)).status).toBe(401);
      }
      expect((await admin(gateway.httpUrl, 'pause', `Bearer ${ADMIN_TOKEN}`)).status).toBe(200);
      expect((await admin(gateway.httpUrl, 'resume', `Bearer ${ADMIN_TOKEN}`)).status).toBe(200);
      expect((await admin(gateway.httpUrl, 'replay', `Bearer ${ADMIN_TOKEN}`)).status).toBe(200);
      // Upstream errors, retries and token renewals (2 s tokens) until everything is through. A reset
      // PUT leaves the gateway unsure whether the upload arrived: it polls notFoundGraceMs (1 s here,
      // 2 min by default) before sending again.
      await waitFor(
        async () => {
          const h = (await (await fetch(`${gateway.httpUrl}/healthz`)).json()) as {
            deliveredScans: number;
          };
          if (h.deliveredScans !== 200)
            throw new Error(`delivered ${h.deliveredScans} of 200; health ${JSON.stringify(h)}`);
          return true;
        },
        { timeoutMs: 40_000, intervalMs: 200 },
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}\n--- gateway output, last 80 lines ---\n${gateway.output().split('\n').slice(-80).join('\n')}`,
        );
      });
      // The token expired and was renewed at least once, so several token requests were logged.
      await new Promise((r) => setTimeout(r, 2500));
      sandbox.setFaults({
        errorRate: 0,
        rateLimitRate: 0,
        resetRate: 0,
        tokenErrorRate: 0,
        tokenResetRate: 0,
      });
      writeFileSync(join(dir, 'inbox', 'b.txt'), 'CELL-LAST\n');
      await waitFor(
        async () =>
          ((await (await fetch(`${gateway.httpUrl}/healthz`)).json()) as { deliveredScans: number })
            .deliveredScans === 201,
        { timeoutMs: 30_000 },
      );
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
    const output = gateway.output();
    expect(output).toContain('admin call refused');
    expect(output).toContain('obtained access token');
    expect(output).toMatch(/upload failed; will retry|upstream answered/);
    expectNoSecret(output, 'the running gateway');
    // A component on every JSON line.
    const json = output.split('\n').filter((l) => l.startsWith('{'));
    expect(json.length).toBeGreaterThan(20);
    for (const line of json)
      expect(typeof (JSON.parse(line) as { component?: unknown }).component, line).toBe('string');
  });

  it('when the service refuses the credentials', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-redact-auth-'));
    sandbox.setFaults({
      errorRate: 0,
      rateLimitRate: 0,
      resetRate: 0,
      tokenErrorRate: 0,
      tokenResetRate: 0,
    });
    const gateway = await startGateway(
      config(dir, sandbox.url),
      { SCAN_GATEWAY_CLIENT_SECRET: WRONG_SECRET, SCAN_GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN },
      dir,
    );
    try {
      writeFileSync(join(dir, 'inbox', 'a.txt'), 'CELL-1\n');
      await waitFor(() => /refused with HTTP 401/.test(gateway.output()), { timeoutMs: 30_000 });
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
    expectNoSecret(gateway.output(), 'a gateway with a refused secret');
  });

  it('on configuration and secret errors', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-redact-config-'));
    const cases: { env: Record<string, string>; extra?: string; file?: string }[] = [
      // a literal secret in the YAML is refused without echoing it
      { env: {}, extra: `, clientSecret: ${CLIENT_SECRET}` },
      // a secret put under a misspelt key, and an admin token that is too short
      {
        env: { SCAN_GATEWAY_CLIENT_SECRET: CLIENT_SECRET },
        extra: `, clientSecrt: ${CLIENT_SECRET}`,
      },
      { env: { SCAN_GATEWAY_CLIENT_SECRET: CLIENT_SECRET, SCAN_GATEWAY_ADMIN_TOKEN: 'KNOWN-x' } },
      // a YAML syntax error on the line holding the secret
      { env: {}, file: `upstream: { clientSecret: "${CLIENT_SECRET}\n` },
    ];
    for (const c of cases) {
      let file = config(dir, 'http://127.0.0.1:9', c.extra ?? '');
      if (c.file) {
        file = join(dir, 'broken.yaml');
        writeFileSync(file, c.file);
      }
      const r = spawnSync(process.execPath, [MAIN_JS, 'run', '--config', file], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', ...c.env },
        encoding: 'utf8',
        timeout: 20_000,
      });
      expect(r.status, r.stderr).toBe(2);
      expectNoSecret(`${r.stdout}${r.stderr}`, `a configuration error (${JSON.stringify(c)})`);
    }
  });
});
