import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { BufferStore } from '../../src/buffer/store.js';
import { ExitCodes } from '../../src/cli/exit.js';
import { MAIN_JS } from '../helpers/gateway-process.js';
import { scanRecord } from '../helpers/records.js';

/**
 * `scan-gateway adopt` (the compiled CLI) where the service cannot be reached: it stops when told
 * (`--timeout`, SIGTERM) with exit 1 and a summary of what is left, and the buffer keeps every scan
 * for the next run; and while it runs, a gateway started on the same file is refused. Delivery with
 * the sandbox, and adopt's own refusals: test/e2e/adopt.test.ts.
 */

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A dead node's buffer with `scans` pending, and a configuration whose upstream refuses connections. */
function setup(scans: number): { dir: string; buffer: string; config: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sg-adopt-cli-'));
  const buffer = join(dir, 'dead', 'buffer.db');
  const store = BufferStore.openAt(buffer);
  store.intake.commitIntake(
    Array.from({ length: scans }, (_, i) => scanRecord(`PK-${i}`, 60)),
    0,
  );
  store.close();
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c, requestTimeoutMs: 1000 }
buffer: { path: ${join(dir, 'own.db')} }
delivery: { maxBatchDelayMs: 0, retryBaseMs: 100, retryMaxMs: 200 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
inputs:
  - { id: inbox, type: files, dir: ${join(dir, 'inbox')}, dcp: GI-01 }
`,
  );
  return { dir, buffer, config };
}

function adopt(
  args: string[],
  cwd: string,
  onStderr?: (text: string, kill: () => void) => void,
): Promise<Run> {
  const child = spawn(process.execPath, [MAIN_JS, 'adopt', ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', SCAN_GATEWAY_CLIENT_SECRET: 'adopt-cli-test-secret' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    onStderr?.(stderr, () => child.kill('SIGTERM'));
  });
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

/** `scan-gateway run --config FILE` to its end (it is expected to fail at start). */
function runGateway(config: string, cwd: string): Promise<Run> {
  const child = spawn(process.execPath, [MAIN_JS, 'run', '--config', config], {
    cwd,
    env: { PATH: process.env.PATH ?? '', SCAN_GATEWAY_CLIENT_SECRET: 'adopt-cli-test-secret' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr: stderr + stdout });
    }),
  );
}

function scanCount(buffer: string): number {
  const db = new Database(buffer, { readonly: true });
  try {
    return db
      .prepare(`SELECT count(*) FROM scans WHERE state IN ('pending', 'batched')`)
      .pluck()
      .get() as number;
  } finally {
    db.close();
  }
}

describe('scan-gateway adopt when the service cannot be reached', () => {
  it('gives up after --timeout with exit 1, saying what is left, and keeps every scan', async () => {
    const { dir, buffer, config } = setup(3);
    const started = performance.now();
    const run = await adopt([buffer, '--config', config, '--timeout', '2', '--json'], dir);
    expect(run.code, run.stderr).toBe(ExitCodes.FAILED);
    // It tried for its --timeout before giving up (a slow machine only makes this longer; a hang
    // is caught by the test's timeout).
    expect(performance.now() - started).toBeGreaterThanOrEqual(2000);
    expect(JSON.parse(run.stdout)).toMatchObject({
      file: buffer,
      delivered: 0,
      failed: 0,
      finished: false,
      left: { pendingScans: 0, openBatches: 1, followedBatches: 0 },
    });
    expect(run.stderr).toMatch(/upload failed; will retry/);
    expect(scanCount(buffer)).toBe(3);
  });

  it('stops cleanly on SIGTERM with exit 1 and the summary in words', async () => {
    const { dir, buffer, config } = setup(2);
    let signalled = false;
    const run = await adopt([buffer, '--config', config], dir, (stderr, kill) => {
      if (signalled || !/adopting the buffer: delivering what it holds/.test(stderr)) return;
      signalled = true;
      kill();
    });
    expect(signalled).toBe(true);
    expect(run.code, run.stderr).toBe(ExitCodes.FAILED);
    expect(run.stdout).toContain(`adopt ${buffer}: stopped with something left`);
    expect(run.stdout).toMatch(
      /left: \d+ scans not yet in a batch, \d+ batches to send or follow \(0 awaiting their status\); run adopt again/,
    );
    expect(scanCount(buffer)).toBe(2);
  });

  it('keeps a gateway off the file while it runs', async () => {
    const { dir, buffer, config } = setup(2);
    // The same configuration, but the adopted file as the gateway's own buffer: a mistake adopt must survive.
    const onAdopted = join(dir, 'on-adopted.yaml');
    writeFileSync(onAdopted, readFileSync(config, 'utf8').replace(join(dir, 'own.db'), buffer));
    let gateway: Promise<Run> | undefined;
    const run = await adopt([buffer, '--config', config], dir, (stderr, kill) => {
      if (gateway || !/adopting the buffer: delivering what it holds/.test(stderr)) return;
      gateway = runGateway(onAdopted, dir).finally(kill);
    });
    const refused = await gateway!;
    expect(refused.code, refused.stderr).toBe(ExitCodes.FAILED);
    expect(refused.stderr).toMatch(
      /cannot open the buffer .*buffer\.db: another process holds it locked .*\(SQLite: database is locked\)/,
    );
    expect(run.code).toBe(ExitCodes.FAILED);
    expect(scanCount(buffer)).toBe(2);
  });

  it('refuses a file that does not exist with exit 2', async () => {
    const { dir, config } = setup(0);
    const run = await adopt([join(dir, 'nowhere.db'), '--config', config], dir);
    expect(run.code).toBe(ExitCodes.USAGE);
    expect(run.stderr).toContain(`scan-gateway adopt: no such file: ${join(dir, 'nowhere.db')}`);
  });
});
