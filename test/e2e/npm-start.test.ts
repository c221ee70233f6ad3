import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { MAIN_JS } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

// `kill -TERM` of `npm start` must stop the gateway: with node under a shell, npm would signal the
// shell, which dies and orphans node. So the script `exec`s node, and npm's signal reaches the
// gateway. And `npm run build` leaves dist/src/main.js executable, so the
// `scan-gateway` link of a from-source install answers instead of "Permission denied".

/** The pids of processes whose command line contains `needle` (from /proc). */
function pidsWith(needle: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) out.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

describe('npm start and the built entry point', () => {
  it('dist/src/main.js is executable after the build', () => {
    expect(statSync(MAIN_JS).mode & 0o111).toBe(0o111);
    expect(readFileSync(MAIN_JS, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
  });

  it('SIGTERM to `npm start` stops the gateway (no orphan keeps serving)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-npm-start-'));
    const config = join(dir, 'npm-start.yaml');
    writeFileSync(
      config,
      `site: { id: npm-start, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${dir}/buffer.db }
http: { listen: '127.0.0.1:0' }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs: []
`,
    );
    // The script's own --config comes first; commander takes the last one given.
    const npm = spawn('npm', ['start', '--', '--config', config], {
      cwd: PACKAGE_ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? dir,
        SCAN_GATEWAY_CLIENT_SECRET: 'npm-start-secret',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    npm.stdout.on('data', (d: Buffer) => (out += d.toString()));
    npm.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) =>
      npm.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : null))),
    );
    await waitFor(() => out.includes('"msg":"scan-gateway started"'), {
      timeoutMs: 30_000,
      what: 'the gateway started under npm start',
    });
    expect(pidsWith(config).length).toBeGreaterThan(0);
    npm.kill('SIGTERM');
    await exited;
    try {
      // The gateway stops itself within 30 s (docs/operations.md, "Stopping"); an orphan would stay.
      await waitFor(() => pidsWith(config).length === 0, {
        timeoutMs: 35_000,
        what: 'the gateway to end with npm start',
      });
      expect(out).toContain('"msg":"stopped"');
    } finally {
      for (const pid of pidsWith(config)) process.kill(pid, 'SIGKILL');
    }
  }, 90_000);
});
