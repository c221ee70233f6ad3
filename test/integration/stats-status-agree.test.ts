import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { registerOpsCommands } from '../../src/cli/ops-commands.js';
import { registerReplayCommand } from '../../src/cli/replay-command.js';
import { loadConfig } from '../../src/config/load.js';
import type { InputAdapter, IntakeSink } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import type { StatsReport } from '../../src/queries/ops-reports.js';
import type { GatewayStatus } from '../../src/health/server.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { waitFor } from '../helpers/wait.js';
import { MAIN_JS } from '../helpers/gateway-process.js';
import { runCli, type CliRun } from '../helpers/cli-in-process.js';

const run = promisify(execFile);

// `scan-gateway buffer stats` and the status (/api/v1/status, the health page) after delivered,
// refused-then-replayed and pruned scans: the same counts under the same names on both surfaces,
// the rows still in the buffer and what pruning removed apart, each on both.

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

/** Input `good` reads into GI-01; `bad` into GI-9 (unknown to the service) or, fixed, GI-01. */
function configText(dir: string, sandboxUrl: string, badDcp: string): string {
  return `site: { id: stats-agree, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60, retryBaseMs: 20, retryMaxMs: 100 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
  - { key: GI-9, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: good, type: files, dir: ${join(dir, 'in-good')}, dcp: GI-01 }
  - { id: bad, type: files, dir: ${join(dir, 'in-bad')}, dcp: ${badDcp} }
`;
}

/** Runs one command line in-process as src/main.ts does (ops commands and replay); exit code and output. */
function cli(dir: string, args: string[]): Promise<CliRun> {
  return runCli(args, [registerOpsCommands, registerReplayCommand], { cwd: dir });
}

function reads(inputId: string, prefix: string, n: number) {
  return Array.from({ length: n }, (_, i) => ({
    kind: 'read' as const,
    read: { inputId, raw: Buffer.from(`${prefix}-${i}`), receivedAt: new Date() },
  }));
}

describe('buffer stats and the status count the same things the same way', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 30 });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it(
    'after delivered, refused and replayed, and pruned scans: equal counts, the rows kept and the rows pruned apart, on both',
    { timeout: 120_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'sg-stats-agree-'));
      const running = join(dir, 'running.yaml');
      const fixed = join(dir, 'fixed.yaml');
      writeFileSync(running, configText(dir, sandbox.url, 'GI-9'));
      writeFileSync(fixed, configText(dir, sandbox.url, 'GI-01'));
      const sinks = new Map<string, IntakeSink>();
      const app = buildApp(
        loadConfig(running, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
        {
          logger: silentLogger(),
          createInput: (config, s: IntakeSink): InputAdapter => ({
            id: config.id,
            type: 'scripted',
            async start() {
              sinks.set(config.id, s);
            },
            async stop() {},
            status: () => ({ id: config.id, type: 'scripted', state: 'up', source: 'script' }),
          }),
        },
      );
      await app.start();
      const status = async () =>
        (await (await fetch(`${app.httpUrl}/api/v1/status`)).json()) as GatewayStatus;
      const stats = async () => {
        const r = await cli(dir, ['buffer', 'stats', '--config', running, '--json']);
        expect(r.code, r.err).toBe(0);
        return JSON.parse(r.out) as StatsReport;
      };
      /** Both surfaces, read with nothing in flight: each count alike, and no drift reported. */
      const expectAgree = async (scans: Record<string, number>, pruned: StatsReport['pruned']) => {
        const st = await status();
        const bs = await stats();
        expect(st.buffer.scans).toEqual(scans);
        expect(bs.scans).toEqual(scans);
        expect(st.buffer.pruned).toEqual(pruned);
        expect(bs.pruned).toEqual(pruned);
        expect(bs.statusScans).toBeUndefined();
      };
      const none = { deliveredScans: 0, deliveredScansEarly: 0, deadLetters: 0 };
      try {
        // 40 delivered; 10 refused by the service (GI-9 unknown): dead letters.
        await sinks.get('good')!.submit(reads('good', 'OK', 40));
        await sinks.get('bad')!.submit(reads('bad', 'BAD', 10));
        await waitFor(
          () => {
            const s = app.status().buffer;
            return s.scans.delivered === 40 && s.scans.failed === 10 && s.undeliveredScans === 0;
          },
          { timeoutMs: 30_000, what: '40 delivered and 10 failed scans' },
        );
        await expectAgree({ delivered: 40, failed: 10 }, none);

        // The dead letters replayed with the fixed mapping and delivered by the running gateway.
        const replay = await cli(dir, ['replay', '--reason', 'invalid dcp', '--config', fixed]);
        expect(replay.out).toMatch(/^replay: 10 selected, 10 queued/);
        await waitFor(
          () =>
            app.status().buffer.scans.delivered === 50 &&
            app.status().buffer.undeliveredScans === 0,
          { timeoutMs: 30_000, what: 'the 10 replayed scans delivered' },
        );
        await expectAgree({ delivered: 50, replayed: 10 }, none);

        // Then 20 more, and everything read before them pruned by hand: the 50 delivered scans
        // and the 10 dead letters their replacements stood for leave the rows, into the counts.
        await new Promise((resolve) => setTimeout(resolve, 5));
        const before = new Date().toISOString();
        await new Promise((resolve) => setTimeout(resolve, 5));
        await sinks.get('good')!.submit(reads('good', 'LATE', 20));
        await waitFor(
          () =>
            app.status().buffer.scans.delivered === 70 &&
            app.status().buffer.undeliveredScans === 0,
          { timeoutMs: 30_000, what: '20 more delivered' },
        );
        const prune = await cli(dir, [
          'buffer',
          'prune',
          '--before',
          before,
          '--config',
          running,
          '--json',
        ]);
        expect(prune.code, prune.err).toBe(0);
        expect(JSON.parse(prune.out)).toMatchObject({ scans: 50, deadLetters: 10 });
        const pruned = { deliveredScans: 50, deliveredScansEarly: 50, deadLetters: 10 };
        await expectAgree({ delivered: 20 }, pruned);

        // The same words on both: the text of buffer stats and the health page.
        const text = (await cli(dir, ['buffer', 'stats', '--config', running])).out;
        const page = await (await fetch(`${app.httpUrl}/`)).text();
        expect(text).toContain(
          'scans:     delivered 20 (in the buffer now; delivered: delivered scans still in the buffer (the audit trail))',
        );
        const prunedWords =
          '50 delivered scans (50 of them before the end of their audit period), 10 replayed dead letters';
        expect(text).toContain(`pruned:    ${prunedWords} (removed from the buffer, lifetime)`);
        expect(page).toContain(
          'delivered scans still in the buffer (the audit trail). In the buffer: delivered 20.',
        );
        expect(page).toContain(`Pruned (lifetime): ${prunedWords}`);
        // The installed program, as plant IT runs it, answers the same.
        const { stdout } = await run(process.execPath, [
          MAIN_JS,
          'buffer',
          'stats',
          '--config',
          running,
          '--json',
        ]);
        const installed = JSON.parse(stdout) as StatsReport;
        expect(installed.scans).toEqual({ delivered: 20 });
        expect(installed.pruned).toEqual(pruned);
      } finally {
        await app.stop();
      }
    },
  );
});
