import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import type { GenealogyNode, ItemTrace } from '../../src/queries/items.js';
import { CommandExit } from '../../src/cli/exit.js';
import { registerReplayCommand } from '../../src/cli/replay-command.js';
import { registerTraceCommand } from '../../src/cli/trace-command.js';
import { loadConfig } from '../../src/config/load.js';
import type { InputAdapter, IntakeSink } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const ENV = { SCAN_GATEWAY_CLIENT_SECRET: SECRET };

/**
 * Item lookup on the real app: a sandbox, a real SQLite buffer, scripted inputs at
 * three stations. Cells are scanned at the module station (SOP-3) after their module's code opens
 * a container; modules at the pack station (EOL-3) after the pack's code; a battery goes in at a
 * DCP the service does not know (fails per scan), then is replayed with the DCP fixed.
 */
function configText(dir: string, sandboxUrl: string, gateDcp: string): string {
  return `site: { id: trace, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60, retryBaseMs: 20, retryMaxMs: 100 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
  - { key: GI-9, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
  - { key: SOP-3, kind: startOfProcess, productModelKey: MOD-48V }
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
inputs:
  - { id: cells, type: files, dir: ${join(dir, 'cells')}, dcp: SOP-3 }
  - { id: packs, type: files, dir: ${join(dir, 'packs')}, dcp: EOL-3 }
  - { id: gate, type: files, dir: ${join(dir, 'gate')}, dcp: ${gateDcp} }
containers:
  - { name: module, inputs: [cells], open: { regex: "^MOD-" } }
  - { name: pack, inputs: [packs], open: { regex: "^PK-" } }
`;
}

const READS: Record<string, string[]> = {
  cells: ['MOD-1', 'CELL-1', 'CELL-2', 'MOD-2', 'CELL-3'],
  packs: ['PK-000815', 'MOD-1', 'MOD-2'],
  gate: ['BAT-7'],
};

async function cli(
  register: (
    program: Command,
    io: { stdout: PassThrough; stderr: PassThrough; cwd: string; env: Record<string, string> },
  ) => void,
  dir: string,
  args: string[],
) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  const program = new Command('scan-gateway')
    .exitOverride()
    .configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (err += s) });
  register(program, { stdout, stderr, cwd: dir, env: ENV });
  let code = 0;
  try {
    await program.parseAsync(['node', 'scan-gateway', ...args]);
  } catch (e) {
    if (e instanceof CommandExit) code = e.exitCode;
    else throw e;
  }
  return { code, out, err };
}

const refs = (nodes: GenealogyNode[]) => nodes.map((n) => n.reference);

describe('item lookup: trace and genealogy from the buffer', () => {
  let sandbox: RunningSandbox;
  let dir: string;
  let app: App;
  let fixed: string;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 20 });
    dir = mkdtempSync(join(tmpdir(), 'sg-trace-'));
    const running = join(dir, 'running.yaml');
    fixed = join(dir, 'fixed.yaml');
    writeFileSync(running, configText(dir, sandbox.url, 'GI-9'));
    writeFileSync(fixed, configText(dir, sandbox.url, 'GI-01'));
    let t = Date.parse('2026-11-24T08:00:00Z');
    app = buildApp(loadConfig(running, { baseDir: dir, env: ENV }), {
      logger: silentLogger(),
      createInput: (config, sink: IntakeSink): InputAdapter => ({
        id: config.id,
        type: 'scripted',
        async start() {
          // One read after the other, in order: a container's members follow its opening read.
          for (const [i, text] of (READS[config.id] ?? []).entries()) {
            await sink.submit([
              {
                kind: 'read',
                read: {
                  inputId: config.id,
                  raw: Buffer.from(text),
                  receivedAt: new Date((t += 1000)),
                  origin: { line: i + 1 },
                },
              },
            ]);
          }
        },
        async stop() {},
        status: () => ({ id: config.id, type: 'scripted', state: 'up', source: 'script' }),
      }),
    });
    await app.start();
    // 8 delivered (5 at the module station, 3 at the pack station) and BAT-7 failed at a DCP the service does not know.
    await waitFor(
      () =>
        (app.status().buffer.scans.failed ?? 0) === 1 &&
        (app.status().buffer.scans.delivered ?? 0) === 8,
      { timeoutMs: 30_000, what: '8 delivered, 1 failed' },
    );
  }, 120_000);
  afterAll(async () => {
    await app?.stop();
    await sandbox?.close();
  });

  it('answers GET /api/v1/items/<reference>: reads, scans, batch, requestId, state; and 404 with prefix matches', async () => {
    const res = await fetch(`${app.httpUrl}/api/v1/items/CELL-1`);
    expect(res.status).toBe(200);
    const t = (await res.json()) as ItemTrace;
    expect(t).toMatchObject({ reference: 'CELL-1', found: true, moreScans: 0 });
    expect(t.scans).toHaveLength(1);
    const s = t.scans[0]!;
    expect(s).toMatchObject({
      dcpKey: 'SOP-3',
      kind: 'startOfProcess',
      productModelKey: 'MOD-48V',
      parents: ['MOD-1'],
      state: 'delivered',
      failureReason: null,
    });
    expect(s.read).toMatchObject({
      inputId: 'cells',
      raw: 'CELL-1',
      receivedAt: '2026-11-24T08:00:02.000Z',
      origin: '{"line":2}',
    });
    expect(s.batch).toMatchObject({ route: 'direct', state: 'done', upstreamState: 'Success' });
    expect(s.batch?.requestId).toMatch(/\S/);

    const missing = await fetch(`${app.httpUrl}/api/v1/items/PK-0008`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as ItemTrace).matches.map((m) => m.reference)).toEqual([
      'PK-000815',
    ]);

    const prefix = (await (await fetch(`${app.httpUrl}/api/v1/items?prefix=CELL-`)).json()) as {
      matches: { reference: string; scans: number }[];
    };
    expect(prefix.matches).toEqual([
      expect.objectContaining({ reference: 'CELL-1', scans: 1 }),
      expect.objectContaining({ reference: 'CELL-2' }),
      expect.objectContaining({ reference: 'CELL-3' }),
    ]);
    // A prefix is a range, not a pattern: LIKE wildcards match nothing.
    expect(
      (
        (await (await fetch(`${app.httpUrl}/api/v1/items?prefix=CELL_`)).json()) as {
          matches: unknown[];
        }
      ).matches,
    ).toEqual([]);
  });

  it('builds pack → modules → cells from the container sessions, both ways', async () => {
    const pack = (await (await fetch(`${app.httpUrl}/api/v1/items/PK-000815`)).json()) as ItemTrace;
    expect(refs(pack.children)).toEqual(['MOD-1', 'MOD-2']);
    expect(refs(pack.children[0]!.nodes)).toEqual(['CELL-1', 'CELL-2']);
    expect(refs(pack.children[1]!.nodes)).toEqual(['CELL-3']);
    expect(pack.parents).toEqual([]);

    const cell = (await (await fetch(`${app.httpUrl}/api/v1/items/CELL-3`)).json()) as ItemTrace;
    expect(refs(cell.parents)).toEqual(['MOD-2']);
    expect(refs(cell.parents[0]!.nodes)).toEqual(['PK-000815']);

    // MOD-1 was scanned twice: opening its container at SOP-3, and as a member of the pack at EOL-3.
    const mod = (await (
      await fetch(`${app.httpUrl}/api/v1/items/MOD-1?depth=1`)
    ).json()) as ItemTrace;
    expect(mod.scans.map((s) => s.dcpKey).sort()).toEqual(['EOL-3', 'SOP-3']);
    expect(refs(mod.parents)).toEqual(['PK-000815']);
    expect(refs(mod.children)).toEqual(['CELL-1', 'CELL-2']);
    expect(mod.depth).toBe(1);
  });

  it(
    'shows a per-scan failure, then the replay that replaced it; the CLI traces it on the stopped gateway',
    { timeout: 120_000 },
    async () => {
      const failed = (await (await fetch(`${app.httpUrl}/api/v1/items/BAT-7`)).json()) as ItemTrace;
      expect(failed.scans).toHaveLength(1);
      expect(failed.scans[0]).toMatchObject({
        dcpKey: 'GI-9',
        state: 'failed',
        failureReason: 'Invalid DCP',
        replayedBy: null,
      });
      // Alone in its batch (timing decides how the batcher groups), the whole batch failed.
      expect(['HasFailures', 'Failed']).toContain(failed.scans[0]!.batch?.upstreamState);

      const replayed = await cli(registerReplayCommand, dir, [
        'replay',
        '--reason',
        'invalid dcp',
        '--config',
        fixed,
      ]);
      expect(replayed.code).toBe(0);
      await waitFor(() => app.status().buffer.scans.delivered === 9, {
        timeoutMs: 30_000,
        what: 'the replayed scan delivered',
      });
      await app.stop();

      // The gateway is stopped: the CLI opens the buffer read-only.
      const json = await cli(registerTraceCommand, dir, [
        'trace',
        'BAT-7',
        '--json',
        '--config',
        fixed,
      ]);
      expect(json.code).toBe(0);
      const t = JSON.parse(json.out) as ItemTrace;
      const [newer, older] = t.scans;
      expect(older).toMatchObject({
        dcpKey: 'GI-9',
        state: 'failed',
        failureReason: 'Invalid DCP',
        replayedBy: newer!.id,
      });
      expect(newer).toMatchObject({
        dcpKey: 'GI-01',
        state: 'delivered',
        replaces: older!.id,
        supplierKey: 'SUP-0042',
        kind: 'goodsIn',
      });
      expect(newer!.read?.id).toBe(older!.read?.id);
      expect(newer!.batch?.upstreamState).toBe('Success');

      const text = await cli(registerTraceCommand, dir, ['trace', 'BAT-7', '--config', fixed]);
      expect(text.out).toMatch(/^BAT-7: 2 scans in the buffer\./);
      expect(text.out).toMatch(/refused by the service, replayed/);
      expect(text.out).toMatch(/reason: Invalid DCP/);
      expect(text.out).toMatch(/replay of scan \d+/);
      expect(text.out).toMatch(/Times in Europe\/Berlin\.\n$/);
      // A buffer file named apart (a backup) is read in the site's time zone when --config names
      // the configuration too, in UTC without it.
      const buffer = join(dir, 'buffer.db');
      const file = await cli(registerTraceCommand, dir, ['trace', 'BAT-7', '--buffer', buffer]);
      expect(file.out).toMatch(/Times in UTC\.\n$/);
      const site = await cli(registerTraceCommand, dir, [
        'trace',
        'BAT-7',
        '--buffer',
        buffer,
        '--config',
        fixed,
      ]);
      expect(site.code).toBe(0);
      expect(site.out).toMatch(/Times in Europe\/Berlin\.\n$/);
      expect(site.out).toContain(`read ${newer!.read!.id} from input gate at 2026-11-24 09:00:`);

      const tree = await cli(registerTraceCommand, dir, ['trace', 'PK-000815', '--config', fixed]);
      expect(tree.out).toMatch(
        /Children:\n {2}├─ MOD-1 .*\n {2}│ {2}├─ CELL-1 .*\n {2}│ {2}└─ CELL-2 .*\n {2}└─ MOD-2 .*\n {5}└─ CELL-3 /,
      );

      const none = await cli(registerTraceCommand, dir, ['trace', 'CELL', '--config', fixed]);
      expect(none.code).toBe(1);
      expect(none.out).toMatch(/CELL: not in the buffer[\s\S]*CELL-1 {2}\(1 scan/);
    },
  );
});
