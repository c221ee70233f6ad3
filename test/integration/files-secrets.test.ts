import { spawnSync } from 'node:child_process';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { link, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAIN_JS, startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A hard link to the gateway's TLS key dropped into a files inbox, against the compiled daemon: by
 * default it goes to `failed/` unread with the reason, and the key stays as it was; with
 * `allowHardLinks: true` it is read as data, and neither `/api/v1/status`, the page nor
 * `failures` shows a PEM block or a line of the key's base64.
 */

const gateways: GatewayProcess[] = [];
let root: string | undefined;
afterEach(async () => {
  for (const g of gateways.splice(0)) await g.stop();
  if (root) await rm(root, { recursive: true, force: true });
  root = undefined;
});

async function setup(
  format: string,
  allowHardLinks: boolean,
): Promise<{ dir: string; key: string; pem: string; config: string }> {
  root = await mkdtemp(join(tmpdir(), 'sg-files-secrets-'));
  const dir = root;
  await mkdir(join(dir, 'inbox'));
  await mkdir(join(dir, 'tls'));
  const pem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
  const key = join(dir, 'tls', 'server.key');
  await writeFile(key, pem, { mode: 0o600 });
  const config = join(dir, 'config.yaml');
  await writeFile(
    config,
    `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c, requestTimeoutMs: 1000 }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { maxBatchDelayMs: 60000 }
http: { listen: 127.0.0.1:0 }
log: { level: info }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: ${format}, dcp: GI-01, stableMs: 30, allowHardLinks: ${allowHardLinks} }
`,
  );
  return { dir, key, pem, config };
}

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** No PEM line and no 40-character piece of any line of the key's body in `text`. */
function expectNoKey(text: string, pem: string, where: string): void {
  expect(text, where).not.toContain('-----BEGIN');
  expect(text, where).not.toContain('PRIVATE KEY');
  for (const line of pem.split('\n').filter((l) => l !== '' && !l.startsWith('-----')))
    expect(text, where).not.toContain(line.slice(0, 40));
}

describe('a hard link to a key in a files inbox', () => {
  it('is refused unread by default: failed/ with the reason, the key as it was', async () => {
    const { dir, key, pem, config } = await setup('lines', false);
    const before = sha256(key);
    const gateway = await startGateway(config, { SCAN_GATEWAY_CLIENT_SECRET: 'x'.repeat(16) }, dir);
    gateways.push(gateway);
    await link(key, join(dir, 'inbox', 'reads.txt'));
    const failed = join(dir, 'inbox', 'failed');
    await waitFor(
      async () =>
        existsSync(failed) && (await readdir(failed)).some((f) => f.endsWith('.error.txt')),
      { timeoutMs: 20_000, what: 'the hard link in failed/' },
    );
    const names = await readdir(failed);
    const errorText = readFileSync(
      join(
        failed,
        names.find((f) => f.endsWith('.error.txt'))!,
      ),
      'utf8',
    );
    expect(errorText).toMatch(
      /a hard link \(this file has 2 names\).*allowHardLinks: true on input inbox/,
    );
    expect(sha256(key)).toBe(before);
    const status = await (await fetch(`${gateway.httpUrl}/api/v1/status`)).text();
    expect(status).toContain('hard link');
    expectNoKey(status, pem, 'status');
    expect(gateway.output()).not.toContain('-----BEGIN');
  });

  for (const format of ['lines', 'json']) {
    it(`read with allowHardLinks (${format}): no key in the status, the page or failures`, async () => {
      const { dir, pem, key, config } = await setup(format, true);
      const gateway = await startGateway(
        config,
        { SCAN_GATEWAY_CLIENT_SECRET: 'x'.repeat(16) },
        dir,
      );
      gateways.push(gateway);
      await link(key, join(dir, 'inbox', 'reads.txt'));
      await waitFor(
        async () => (await readdir(join(dir, 'inbox'))).every((f) => f !== 'reads.txt'),
        { timeoutMs: 20_000, what: 'the file taken' },
      );
      // json: one rejection holding the file's first bytes, which the status lists (masked);
      // lines: a read of each line, in the buffer, shown by the page's recent activity.
      let status = '';
      await waitFor(
        async () => {
          status = await (await fetch(`${gateway.httpUrl}/api/v1/status`)).text();
          return format === 'lines' || status.includes('[redacted]');
        },
        { timeoutMs: 20_000, what: 'the key, masked, in the status' },
      );
      expectNoKey(status, pem, 'status');
      const page = await (await fetch(`${gateway.httpUrl}/`)).text();
      expectNoKey(page, pem, 'page');
      const failures = spawnSync(
        process.execPath,
        [MAIN_JS, 'failures', '--buffer', join(dir, 'buffer.db'), '--limit', '100'],
        { encoding: 'utf8', cwd: dir },
      );
      expect(failures.status, failures.stderr).toBe(0);
      expectNoKey(failures.stdout, pem, 'failures');
      if (format === 'lines') {
        // Each line of the key is a scan in the buffer: trace finds it, and shows it masked.
        const line = pem.split('\n')[1]!;
        const trace = spawnSync(
          process.execPath,
          [MAIN_JS, 'trace', line, '--buffer', join(dir, 'buffer.db')],
          { encoding: 'utf8', cwd: dir },
        );
        expect(trace.status, trace.stderr + trace.stdout).toBe(0);
        expect(trace.stdout).toContain('[redacted]: 1 scan in the buffer');
        expectNoKey(trace.stdout, pem, 'trace');
      }
      expectNoKey(gateway.output(), pem, 'log');
    });
  }
});
