import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { MAIN_JS, startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A file holding the client secret, refused as CSV, must not show the secret on
 * any surface: status JSON, health page, healthz, `failed/*.error.txt`, the `failures` command,
 * nor the reason stored in the buffer. The gateway runs as systemd runs it (a child process of
 * the compiled daemon), with the secret in its environment.
 */

const SECRET = 'k7Qz-side-door-client-secret-91f3e0';
const ADMIN_TOKEN = 'side-door-admin-token-5e2b77c1a9';

describe('secrets never leave through a side door', () => {
  let sandbox: RunningSandbox;
  let gateway: GatewayProcess | undefined;
  let dir: string;
  let config: string;
  const env = { SCAN_GATEWAY_CLIENT_SECRET: SECRET, SCAN_GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN };

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
    dir = mkdtempSync(join(tmpdir(), 'sg-side-doors-'));
    mkdirSync(join(dir, 'goods-in'));
    config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: side-doors, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: goods-in-pc, type: files, dir: ${join(dir, 'goods-in')}, format: csv, barcodeColumn: barcode, dcp: GI-01, stableMs: 100 }
`,
    );
    gateway = await startGateway(config, env, dir);
  });

  afterAll(async () => {
    await gateway?.stop();
    await sandbox?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a CSV file holding the client secret is refused, and the secret shows nowhere', async () => {
    // What a link to the secret (or a careless copy of it) would drop: the secret as a whole file.
    writeFileSync(join(dir, 'goods-in', 'secret.csv'), `${SECRET}\n`);
    const failed = join(dir, 'goods-in', 'failed');
    await waitFor(
      () => readdirSync(failed, { withFileTypes: true }).some((e) => e.name.endsWith('.error.txt')),
      { timeoutMs: 30_000, what: 'the refused file in failed/' },
    );

    // The evidence is kept (the file itself in failed/, the raw read in the buffer)…
    expect(readFileSync(join(failed, 'secret.csv'), 'utf8')).toContain(SECRET);
    const db = new Database(join(dir, 'buffer.db'), { readonly: true });
    const rows = db.prepare(`SELECT reason, raw FROM reads WHERE outcome = 'rejected'`).all() as {
      reason: string;
      raw: Buffer;
    }[];
    db.close();
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.some((r) => r.raw.toString('utf8').includes(SECRET))).toBe(true);
    // …but the reason stored with it is scrubbed,
    for (const r of rows) expect(r.reason).not.toContain(SECRET);

    // and so is every surface that shows it.
    const errorText = readFileSync(join(failed, 'secret.csv.error.txt'), 'utf8');
    expect(errorText).toMatch(/reason: /);
    expect(errorText).not.toContain(SECRET);

    const url = gateway!.httpUrl;
    const status = await (await fetch(`${url}/api/v1/status`)).text();
    const problems = (JSON.parse(status) as { problems: { reason: string; raw: string }[] })
      .problems;
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.some((p) => p.raw.includes('[redacted]'))).toBe(true);
    expect(status).not.toContain(SECRET);

    const page = await (await fetch(`${url}/`)).text();
    expect(page).toContain('[redacted]');
    expect(page).not.toContain(SECRET);
    for (const path of ['/healthz', '/readyz', '/metrics'])
      expect(await (await fetch(`${url}${path}`)).text()).not.toContain(SECRET);

    for (const args of [['failures'], ['failures', '--json']]) {
      const run = spawnSync(process.execPath, [MAIN_JS, ...args, '--config', config], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', ...env },
        encoding: 'utf8',
      });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout).toContain('[redacted]');
      expect(run.stdout).not.toContain(SECRET);
    }
    expect(gateway!.output()).not.toContain(SECRET);
  });
});
