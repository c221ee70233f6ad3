import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { buildApp, type App } from '../../src/app.js';
import { CommandExit } from '../../src/cli/exit.js';
import { registerContainersCommand } from '../../src/cli/containers-command.js';
import { registerTraceCommand } from '../../src/cli/trace-command.js';
import { loadConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { freePort } from '../helpers/ports.js';
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const ADMIN = 'admin-token-for-the-station-loop';
const ENV = { SCAN_GATEWAY_CLIENT_SECRET: SECRET, SCAN_GATEWAY_ADMIN_TOKEN: ADMIN };

/** A cell's label as the reader sends it: GS1 element string in brackets, serial C0001…. */
const cell = (n: number) => `(01)09521234543213(21)C${String(n).padStart(4, '0')}(10)L1`;

/**
 * The station loop on the real app: a sandbox, a real SQLite buffer, two TCP inputs in server mode
 * (a handheld connects to each). ST-20 builds modules of exactly 12 cells and refuses a new module
 * label while the open module is short; ST-21 closes a short module and flags it. The app is
 * stopped and started again on the same buffer in the middle of a module.
 */
describe('containers of exactly N members through the real app', () => {
  let sandbox: RunningSandbox;
  let app: App;
  let dir: string;
  let file: string;
  const ports: Record<string, number> = {};
  const scanners: Record<string, Socket> = {};

  const start = async () => {
    app = buildApp(loadConfig(file, { baseDir: dir, env: ENV }), {
      logger: silentLogger(),
      adminToken: ADMIN,
    });
    await app.start();
    for (const [id, port] of Object.entries(ports)) {
      const s = createConnection({ host: '127.0.0.1', port });
      await new Promise((resolve) => s.once('connect', resolve));
      scanners[id] = s;
    }
  };
  const stop = async () => {
    for (const s of Object.values(scanners)) s.destroy();
    await app.stop();
  };

  /** Reads committed so far, by the inputs' counters. */
  const committed = (id: string) =>
    (app.status().inputs.find((i) => i.id === id)?.counters?.reads ?? 0) as number;
  /** One read at a time, as a person scans: each committed before the next. */
  const scan = async (id: string, code: string) => {
    const before = committed(id);
    scanners[id]!.write(`${code}\r`);
    await waitFor(() => committed(id) > before, { what: `read ${code} committed` });
  };
  const item = async (ref: string) => {
    const res = await fetch(`${app.httpUrl}/api/v1/items/${encodeURIComponent(ref)}`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const open = () =>
    (
      app.status().sessions as { parent: string; reads: number; fill: string; station: string }[]
    ).map((s) => `${s.station} ${s.parent} ${s.fill}`);
  const station = async (dcp: string) => {
    const html = await (await fetch(`${app.httpUrl}/station/${dcp}`)).text();
    const json = /<script type="application\/json" id="snapshot">(.*?)<\/script>/s.exec(html)![1]!;
    return {
      html,
      snapshot: JSON.parse(json) as Record<string, unknown> & { last: Record<string, unknown>[] },
    };
  };

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 20 });
    ports.st20 = await freePort();
    ports.st21 = await freePort();
    dir = mkdtempSync(join(tmpdir(), 'sg-members-'));
    file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      `site: { id: line-2, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: ST-20, kind: startOfProcess, productModelKey: MOD-12, duplicateWindowMs: 0 }
  - { key: ST-21, kind: startOfProcess, productModelKey: MOD-12, duplicateWindowMs: 0 }
inputs:
  - { id: st20, type: tcp, mode: server, host: 127.0.0.1, port: ${ports.st20}, dcp: ST-20 }
  - { id: st21, type: tcp, mode: server, host: 127.0.0.1, port: ${ports.st21}, dcp: ST-21 }
containers:
  - { name: module, inputs: [st20], open: { regex: "^MOD-" }, members: 12, onIncomplete: refuse }
  - { name: module21, inputs: [st21], open: { regex: "^MOD-" }, members: 12, onIncomplete: close }
rules:
  - { name: modules, match: { regex: "^MOD-" } }
  - name: cells
    match: { ais: ['01', '21'] }
    reference: { ai: '21' }
    requireContainer: true
`,
    );
    await start();
  });
  afterAll(async () => {
    await stop();
    await sandbox?.close();
  });

  it(
    'takes 12 cells, closes the module by itself, and refuses a 13th; trace of the 13th shows the refusal',
    { timeout: 120_000 },
    async () => {
      await scan('st20', 'MOD-L2-000124');
      expect(open()).toEqual(['st20 MOD-L2-000124 0 of 12']);
      for (let i = 1; i <= 12; i++) await scan('st20', cell(i));
      expect(open()).toEqual([]);
      const module = await item('MOD-L2-000124');
      expect(module.body.containers).toEqual([
        expect.objectContaining({
          state: 'complete',
          members: 12,
          expected: 12,
          why: '12 of 12: complete',
        }),
      ]);
      expect((module.body.children as unknown[]).length).toBe(12);

      await scan('st20', cell(13));
      const refused = await item('C0013');
      expect(refused.status).toBe(200);
      expect(refused.body.found).toBe(false);
      expect(refused.body.refusals).toEqual([
        expect.objectContaining({
          station: null,
          inputId: 'st20',
          reason: expect.stringContaining('MOD-L2-000124 is complete (12 of 12)'),
        }),
      ]);
      const { snapshot } = await station('ST-20');
      expect(snapshot.last[0]).toMatchObject({
        verdict: 'refused',
        words: 'MOD-L2-000124 is complete (12 of 12): this item is one too many',
      });

      // The CLI's trace answers with the refusal, not "not in the buffer".
      const text = await cli(registerTraceCommand, ['trace', 'C0013', '--config', file]);
      expect(text.code).toBe(0);
      expect(text.out).toMatch(/^C0013: no scan of it in the buffer; its reads were refused:/);
      expect(text.out).toMatch(/at input st20: REFUSED: rule cells: needs an open container/);
      expect(text.out).not.toMatch(/not in the buffer \(/);
    },
  );

  it(
    'onIncomplete: refuse keeps the short module, refuses the next label and says why; a rescan changes nothing; a restart keeps the count',
    { timeout: 120_000 },
    async () => {
      await scan('st20', 'MOD-L2-000125');
      for (let i = 101; i <= 103; i++) await scan('st20', cell(i));
      await scan('st20', 'MOD-L2-000126');
      expect(open()).toEqual(['st20 MOD-L2-000125 3 of 12']);
      const { snapshot, html } = await station('ST-20');
      expect(snapshot.last[0]).toMatchObject({
        verdict: 'refused',
        text: 'MOD-L2-000126',
        words: 'MOD-L2-000125 has 3 of 12: finish it first',
      });
      expect(snapshot.containers).toEqual([
        { name: 'module', parent: 'MOD-L2-000125', members: 3, expected: 12, inputId: 'st20' },
      ]);
      expect(html).toContain('<b class="fill">3 of 12</b>');
      // The refused label is itself traceable, with why.
      expect((await item('MOD-L2-000126')).body.refusals).toEqual([
        expect.objectContaining({
          reason: expect.stringMatching(/^MOD-L2-000125 has 3 of 12: finish it first/),
        }),
      ]);

      // The open label again, and a cell again: the same module, the same count.
      await scan('st20', 'MOD-L2-000125');
      await scan('st20', cell(103));
      expect(open()).toEqual(['st20 MOD-L2-000125 3 of 12']);

      // A restart in the middle of the module: its count goes on from the buffer.
      await stop();
      await start();
      expect(open()).toEqual(['st20 MOD-L2-000125 3 of 12']);
      await scan('st20', cell(104));
      expect(open()).toEqual(['st20 MOD-L2-000125 4 of 12']);
      const fourth = await item('C0104');
      expect((fourth.body.scans as { parents: string[] }[])[0]!.parents).toEqual(['MOD-L2-000125']);

      // A supervisor closes it short, from the CLI through the admin API: who and why recorded.
      const closed = await cli(registerContainersCommand, [
        'containers',
        'close',
        'module',
        '--station',
        'st20',
        '--by',
        'Anna (line lead)',
        '--why',
        'cell 5 scrapped',
        '--config',
        file,
        '--url',
        app.httpUrl!,
      ]);
      expect(closed).toMatchObject({
        code: 0,
        out: 'MOD-L2-000125 closed with 4 of 12 by Anna (line lead): cell 5 scrapped\n',
      });
      expect(open()).toEqual([]);
      expect((await item('MOD-L2-000125')).body.containers).toEqual([
        expect.objectContaining({
          state: 'incomplete',
          members: 4,
          why: 'cell 5 scrapped',
          by: expect.stringMatching(/^Anna \(line lead\) \(admin token, /),
        }),
      ]);
      // A wrong token is refused.
      const refused = await fetch(`${app.httpUrl}/api/v1/admin/close-container`, {
        method: 'POST',
        headers: { authorization: 'Bearer nope', 'content-type': 'application/json' },
        body: '{}',
      });
      expect(refused.status).toBe(401);
    },
  );

  it(
    'onIncomplete: close closes the short module as incomplete: a problem on the page, the metric, trace',
    { timeout: 120_000 },
    async () => {
      await scan('st21', 'MOD-L2-000200');
      for (let i = 201; i <= 203; i++) await scan('st21', cell(i));
      await scan('st21', 'MOD-L2-000201');
      expect(open()).toEqual(['st21 MOD-L2-000201 0 of 12']);

      const problem = (app.status().healthProblems ?? []).find(
        (p) => p.code === 'SCANGW_H_CONTAINER_INCOMPLETE',
      );
      expect(problem?.sentence).toMatch(
        /1 container was closed incomplete .*MOD-L2-000200 \(module21 at st21\) with 3 of 12 members \(new label MOD-L2-000201\)/,
      );
      const page = await (await fetch(`${app.httpUrl}/`)).text();
      expect(page).toContain('SCANGW_H_CONTAINER_INCOMPLETE');
      const metrics = await (await fetch(`${app.httpUrl}/metrics`)).text();
      expect(metrics).toMatch(
        /^scan_gateway_containers\{container="module21",state="incomplete"\} 1$/m,
      );
      expect(metrics).toMatch(
        /^scan_gateway_containers\{container="module",state="complete"\} 1$/m,
      );

      const text = await cli(registerTraceCommand, ['trace', 'MOD-L2-000200', '--config', file]);
      expect(text.out).toMatch(
        /Container MOD-L2-000200 \(module21 at st21\): 3 of 12, INCOMPLETE at .* \(new label MOD-L2-000201\)\./,
      );
    },
  );

  async function cli(
    register: (
      program: Command,
      io: { stdout: PassThrough; stderr: PassThrough; cwd: string; env: Record<string, string> },
    ) => void,
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
});
