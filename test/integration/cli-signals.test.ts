import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MAIN_JS } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

// The compiled CLI as a person meets it: Ctrl-C or SIGTERM ends a one-shot command at once (run
// and sandbox stop gracefully, tested elsewhere), and a bad option value is a usage error.

let dir: string;
let blackhole: Server;
const sockets: Socket[] = [];
let config: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sg-cli-signals-'));
  // Accepts connections and never answers: an upstream behind a stuck proxy.
  blackhole = createServer((s) => void sockets.push(s));
  await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve));
  const port = (blackhole.address() as { port: number }).port;
  config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:${port}, authUrl: http://127.0.0.1:${port}, clientId: c, clientSecretFile: ${join(PACKAGE_ROOT, 'config/demo-client-secret')} }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: S }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, format: lines, dcp: GI-01 }
`,
  );
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((resolve) => blackhole.close(() => resolve()));
});

describe('the CLI and signals', () => {
  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const)(
    '%s ends `products list` waiting on a silent upstream at once, exit %i',
    async (signal, exitCode) => {
      const child = spawn(process.execPath, [MAIN_JS, 'products', 'list', '--config', config], {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      const exited = new Promise<number | null>((resolve) =>
        child.on('exit', (code) => resolve(code)),
      );
      await waitFor(() => sockets.length > 0, {
        timeoutMs: 30_000,
        what: 'the command connected upstream',
      });
      child.kill(signal);
      const code = await Promise.race([
        exited,
        new Promise<'still running'>((r) => setTimeout(() => r('still running'), 5000)),
      ]);
      if (code === 'still running') child.kill('SIGKILL');
      expect(code).toBe(exitCode);
      expect(err).toContain(`interrupted (${signal})`);
      for (const s of sockets.splice(0)) s.destroy();
    },
  );

  it('names the configuration key when http.listen is taken by another program', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    const file = join(dir, 'port-taken.yaml');
    writeFileSync(
      file,
      `${readFileSync(config, 'utf8')}buffer: { path: ${join(dir, 'taken.db')} }\nhttp: { listen: 127.0.0.1:${port} }\n`,
    );
    try {
      const r = spawnSync(process.execPath, [MAIN_JS, 'run', '--config', file], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`http.listen 127.0.0.1:${port}: the address is in use`);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });

  it('refuses an unknown --log-level as a usage error (exit 2) that lists the levels', () => {
    const r = spawnSync(
      process.execPath,
      [MAIN_JS, 'run', '--config', config, '--log-level', 'verbose'],
      { cwd: dir, encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('Allowed choices are fatal, error, warn, info, debug, trace');
  });
});
