import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import type { ValueMatches } from '../../src/queries/key-search.js';
import type { ItemTrace } from '../../src/queries/items.js';
import { CommandExit } from '../../src/cli/exit.js';
import { registerTraceCommand } from '../../src/cli/trace-command.js';
import { loadConfig } from '../../src/config/load.js';
import type { InputAdapter, IntakeSink } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const ENV = { SCAN_GATEWAY_CLIENT_SECRET: SECRET };
const GS = '\u001d';
const PACK = 'https://id.gs1.org/01/09521234543213/21/C2611030001234';

/**
 * One pack, four carriers, one item: the real app (sandbox, SQLite buffer) takes the same pack as
 * GS1 DataMatrix with `]d2` at Goods In, GS1-128 with `]C1` at start of process, a QR Code with a
 * Digital Link at end of process and the bracketed line of an MES export at Goods Out, with
 * `reference: { gs1: canonical }`. Then every form a person has finds it, through
 * `scan-gateway trace` and `GET /api/v1/items/…`; a lot and a GTIN list their items.
 */
function configText(dir: string, sandboxUrl: string): string {
  return `site: { id: gs1-lookup, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandboxUrl}, authUrl: ${sandboxUrl}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60, retryBaseMs: 20, retryMaxMs: 100 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }
  - { key: SOP-3, kind: startOfProcess, productModelKey: PACK-A }
  - { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }
  - { key: GO-01, kind: goodsOut, productModelKey: PACK-A, clientKey: CL-1 }
inputs:
  - { id: datamatrix, type: files, dir: ${join(dir, 'a')}, dcp: GI-01 }
  - { id: gs1-128, type: files, dir: ${join(dir, 'b')}, dcp: SOP-3 }
  - { id: qr, type: files, dir: ${join(dir, 'c')}, dcp: EOL-3 }
  - { id: mes, type: files, dir: ${join(dir, 'd')}, dcp: GO-01 }
rules:
  - name: gs1-item
    match: { gs1: true }
    reference: { gs1: canonical }
    attributes: { batch: { ai: '10' } }
`;
}

const READS: Record<string, string[]> = {
  datamatrix: [
    `]d2010952123454321310B2611-03${GS}21C2611030001234`,
    `]d2010952123454321310B2611-03${GS}21C2611030001235`,
  ],
  'gs1-128': [`]C1010952123454321321C2611030001234${GS}10B2611-03`],
  qr: [']Q1https://id.gs1.org/01/09521234543213/10/B2611-03/21/C2611030001234'],
  mes: ['(01)09521234543213(10)B2611-03(21)C2611030001234'],
};

/** Every form a person may have of the pack: label text, raw reads as typed, a Digital Link, GTIN with serial, the serial. */
const FORMS = [
  '(01)09521234543213(10)B2611-03(21)C2611030001234',
  '(01)09521234543213(21)C2611030001234',
  ']d2010952123454321310B2611-03<GS>21C2611030001234',
  ']d2010952123454321310B2611-03\\x1d21C2611030001234',
  ']C1010952123454321310B2611-03^]21C2611030001234',
  ']Q3010952123454321310B2611-03<GS>21C2611030001234',
  `010952123454321310B2611-03${GS}21C2611030001234`,
  'https://example.com/01/09521234543213/10/B2611-03/21/C2611030001234?17=281231',
  PACK,
  'C2611030001234',
];

async function trace(dir: string, args: string[]) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  const program = new Command('scan-gateway')
    .exitOverride()
    .configureOutput({ writeOut: (s) => (out += s), writeErr: () => undefined });
  registerTraceCommand(program, { stdout, stderr, cwd: dir, env: ENV });
  let code = 0;
  try {
    await program.parseAsync(['node', 'scan-gateway', ...args]);
  } catch (e) {
    if (e instanceof CommandExit) code = e.exitCode;
    else throw e;
  }
  return { code, out };
}

describe('one canonical GS1 reference, found by any form', () => {
  let sandbox: RunningSandbox;
  let dir: string;
  let config: string;
  let app: App;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 20 });
    dir = mkdtempSync(join(tmpdir(), 'sg-gs1-lookup-'));
    config = join(dir, 'config.yaml');
    writeFileSync(config, configText(dir, sandbox.url));
    let t = Date.parse('2026-11-24T08:00:00Z');
    app = buildApp(loadConfig(config, { baseDir: dir, env: ENV }), {
      logger: silentLogger(),
      createInput: (c, sink: IntakeSink): InputAdapter => ({
        id: c.id,
        type: 'scripted',
        async start() {
          for (const [i, text] of (READS[c.id] ?? []).entries()) {
            await sink.submit([
              {
                kind: 'read',
                read: {
                  inputId: c.id,
                  raw: Buffer.from(text),
                  receivedAt: new Date((t += 1000)),
                  origin: { line: i + 1 },
                },
              },
            ]);
          }
        },
        async stop() {},
        status: () => ({ id: c.id, type: 'scripted', state: 'up', source: 'script' }),
      }),
    });
    await app.start();
    await waitFor(() => (app.status().buffer.scans.delivered ?? 0) === 5, {
      timeoutMs: 30_000,
      what: '5 scans delivered',
    });
  }, 120_000);
  afterAll(async () => {
    await app?.stop();
    await sandbox?.close();
  });

  it('sends the pack read by four carriers under one reference', async () => {
    const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
      scans: { scan: { reference: string; dcpKey: string; attributes: unknown } }[];
    };
    const packs = log.scans.filter((s) => s.scan.reference === PACK);
    expect(packs.map((s) => s.scan.dcpKey).sort()).toEqual(['EOL-3', 'GI-01', 'GO-01', 'SOP-3']);
    for (const s of packs) expect(s.scan.attributes).toEqual([{ key: 'batch', value: 'B2611-03' }]);
  });

  it('finds it by every form through GET /api/v1/items/<form>', async () => {
    for (const form of FORMS) {
      const res = await fetch(`${app.httpUrl}/api/v1/items/${encodeURIComponent(form)}`);
      expect(res.status, form).toBe(200);
      const t = (await res.json()) as ItemTrace;
      expect(t.reference, form).toBe(PACK);
      expect(t.scans, form).toHaveLength(4);
    }
  });

  it('finds it by every form through scan-gateway trace, saying how the query was read', async () => {
    for (const form of FORMS) {
      const r = await trace(dir, ['trace', form, '--config', config, '--json']);
      expect(r.code, form).toBe(0);
      expect((JSON.parse(r.out) as ItemTrace).reference, form).toBe(PACK);
    }
    const text = await trace(dir, [
      'trace',
      '(01)09521234543213(10)B2611-03(21)C2611030001234',
      '--config',
      config,
    ]);
    expect(text.out).toContain(
      `(01)09521234543213(10)B2611-03(21)C2611030001234: found as ${PACK}`,
    );
    expect(text.out).toContain(
      'identified by AI 01 (GTIN), AI 21 (SERIAL); not part of the identity: AI 10 (BATCH/LOT)',
    );
    expect(text.out).toContain(`${PACK}: 4 scans in the buffer.`);
  });

  it('lists the items of a lot and of a GTIN with counts, paged through GET /api/v1/items?value=', async () => {
    const lot = await trace(dir, ['trace', 'B2611-03', '--config', config]);
    expect(lot.code).toBe(0);
    expect(lot.out).toContain('B2611-03 as AI 10 (BATCH/LOT): 5 scans, 2 items listed');

    const first = (await (
      await fetch(`${app.httpUrl}/api/v1/items?value=09521234543213&ai=01&limit=1`)
    ).json()) as { matches: ValueMatches[] };
    expect(first.matches).toHaveLength(1);
    // The inputs run side by side: which pack was scanned last is not fixed, the two pages are.
    expect(first.matches[0]).toMatchObject({
      ai: '01',
      title: 'GTIN',
      value: '09521234543213',
      scans: 5,
    });
    expect(first.matches[0]!.items).toHaveLength(1);
    const next = first.matches[0]!.next!;
    const second = (await (
      await fetch(`${app.httpUrl}/api/v1/items?value=09521234543213&cursor=${next}&limit=1`)
    ).json()) as { matches: ValueMatches[] };
    expect(second.matches[0]).toMatchObject({ next: null });
    const items = [...first.matches[0]!.items, ...second.matches[0]!.items].map((i) => [
      i.reference,
      i.scans,
    ]);
    expect(items.sort()).toEqual([
      [PACK, 4],
      ['https://id.gs1.org/01/09521234543213/21/C2611030001235', 1],
    ]);

    const bad = await fetch(`${app.httpUrl}/api/v1/items?value=x&cursor=nonsense`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toContain(
      'cursor must be the "next" of the previous page',
    );
  });
});
