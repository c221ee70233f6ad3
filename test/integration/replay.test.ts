import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { registerReplayCommand } from '../../src/cli/replay-command.js';
import { loadConfig } from '../../src/config/load.js';
import type { InputAdapter, IntakeSink } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { waitFor } from '../helpers/wait.js';
import { runCli, type CliRun } from '../helpers/cli-in-process.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

function configText(dir: string, sandboxUrl: string, inputDcp: string): string {
  return `site: { id: replay, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60, retryBaseMs: 20, retryMaxMs: 100 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
  - { key: GI-9, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
inputs:
  - { id: gate, type: files, dir: ${join(dir, 'in')}, dcp: ${inputDcp} }
`;
}

/** Runs `scan-gateway replay ARGS` in-process; answers exit code and output. */
function replay(dir: string, ...args: string[]): Promise<CliRun> {
  return runCli(['replay', ...args], [registerReplayCommand], { cwd: dir });
}

describe('replay: dead letters mapped again with the current configuration while the daemon runs', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 30 });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it(
    'queues the failed scans of a wrong DCP mapping again, and the running gateway delivers them',
    { timeout: 120_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'sg-replay-'));
      const running = join(dir, 'running.yaml');
      const fixed = join(dir, 'fixed.yaml');
      writeFileSync(running, configText(dir, sandbox.url, 'GI-9'));
      writeFileSync(fixed, configText(dir, sandbox.url, 'GI-01'));
      const app = buildApp(
        loadConfig(running, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
        {
          logger: silentLogger(),
          createInput: (config, sink: IntakeSink): InputAdapter => ({
            id: config.id,
            type: 'scripted',
            async start() {
              await sink.submit(
                Array.from({ length: 30 }, (_, i) => ({
                  kind: 'read' as const,
                  read: {
                    inputId: config.id,
                    raw: Buffer.from(`BAT-${i}`),
                    receivedAt: new Date(),
                  },
                })),
              );
            },
            async stop() {},
            status: () => ({ id: config.id, type: 'scripted', state: 'up', source: 'script' }),
          }),
        },
      );
      await app.start();
      try {
        // The service does not know GI-9: every scan fails upstream and stays as a dead letter.
        await waitFor(() => (app.status().buffer.scans.failed ?? 0) === 30, {
          timeoutMs: 30_000,
          what: '30 failed scans',
        });
        expect(app.status().problems[0]).toMatchObject({ kind: 'failed', reason: 'Invalid DCP' });

        const usage = await replay(dir, '--config', fixed);
        expect(usage.code).toBe(2);
        expect(usage.err).toMatch(/needs a selection/);

        const dry = await replay(
          dir,
          '--reason',
          'invalid dcp',
          '--dry-run',
          '--json',
          '--config',
          fixed,
        );
        expect(dry.code).toBe(0);
        expect(JSON.parse(dry.out)).toMatchObject({ selected: 30, queued: 30, dryRun: true });
        expect(app.status().buffer.scans.failed).toBe(30);
        // For people: each field that changes, old → new; the unchanged ones (supplier, product) not.
        const shown = await replay(dir, '--reason', 'invalid dcp', '--dry-run', '--config', fixed);
        expect(shown.out).toMatch(
          /: would be queued at DCP GI-01; was: Invalid DCP\n {6}dcpKey: GI-9 → GI-01\n {2}\S/,
        );
        expect(shown.out).not.toMatch(/supplierKey|productModelKey/);
        expect(app.status().buffer.scans.failed).toBe(30);

        const done = await replay(dir, '--reason', 'invalid dcp', '--config', fixed);
        expect(done.code).toBe(0);
        expect(done.out).toMatch(/^replay: 30 selected, 30 queued, 0 not queued/);
        expect(done.out).toMatch(/queued as scan \d+ at DCP GI-01; was: Invalid DCP/);

        await waitFor(() => app.status().buffer.scans.delivered === 30, {
          timeoutMs: 30_000,
          what: 'replayed scans delivered by the running gateway',
        });
        expect(app.status().buffer.scans).toMatchObject({ delivered: 30, replayed: 30 });
        expect(app.status().buffer.scans.failed).toBeUndefined();
        const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
          scans: { scan: { reference: string; dcpKey: string } }[];
        };
        const fixedScans = log.scans
          .filter((s) => s.scan.dcpKey === 'GI-01')
          .map((s) => s.scan.reference)
          .sort();
        expect(fixedScans).toEqual(Array.from({ length: 30 }, (_, i) => `BAT-${i}`).sort());

        // Nothing left to replay; the dead letters stay for audit, linked to their replacements.
        const again = await replay(dir, '--all', '--json', '--config', fixed);
        expect(JSON.parse(again.out)).toMatchObject({ selected: 0 });
        const db = new Database(join(dir, 'buffer.db'), { readonly: true });
        try {
          expect(
            db
              .prepare(
                `SELECT count(*) FROM scans WHERE state = 'failed' AND replayed_by IS NOT NULL`,
              )
              .pluck()
              .get(),
          ).toBe(30);
        } finally {
          db.close();
        }
      } finally {
        await app.stop();
      }
    },
  );
});
