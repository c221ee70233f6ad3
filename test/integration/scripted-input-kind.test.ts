import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import Database from 'better-sqlite3';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
// The one line that adds the kind: everything else about it is in its folder.
import '../fixtures/scripted-input/register.js';
import { buildApp } from '../../src/app.js';
import { registerConfigCommand } from '../../src/cli/config-command.js';
import { CommandExit } from '../../src/cli/exit.js';
import type { TryResult } from '../../src/cli/try-command.js';
import { loadConfig } from '../../src/config/load.js';
import { registerInputKind } from '../../src/inputs/registry.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { scriptedKind } from '../fixtures/scripted-input/kind.js';
import { runTry } from '../helpers/try-cli.js';
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

/**
 * An input kind kept outside src/ (test/fixtures/scripted-input), added by one
 * `registerInputKind` line, runs as the built-in kinds do: through the real app into the real
 * buffer, through `try --payload` and through `config check` (schema errors with their line,
 * the file it names checked by its resources).
 */
function site(inputs: string): { dir: string; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sg-scripted-'));
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `site: { id: scripted, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
http: { listen: 127.0.0.1:0 }
dcps: [{ key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }]
inputs:
${inputs}`,
  );
  return { dir, file };
}

async function configCheck(file: string): Promise<{ code: number; out: string }> {
  const stdout = new PassThrough();
  let out = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  const program = new Command('scan-gateway').exitOverride();
  registerConfigCommand(program, { stdout, cwd: PACKAGE_ROOT, env: {} });
  try {
    await program.parseAsync(['node', 'scan-gateway', 'config', 'check', '--config', file]);
  } catch (e) {
    if (e instanceof CommandExit) return { code: e.exitCode, out };
    throw e;
  }
  return { code: 0, out };
}

describe('an input kind added from outside src/', () => {
  it('is refused when registered twice, or when its schema does not name its type', () => {
    expect(() => registerInputKind(scriptedKind)).toThrow(/registered twice/);
    expect(() => registerInputKind({ ...scriptedKind, type: 'scripted-2' })).toThrow(
      /type: z.literal\('scripted-2'\)/,
    );
  });

  it('runs through the real app: its reads are committed to the buffer and it shows in the status', async () => {
    const { dir, file } = site(
      `  - { id: script, type: scripted, reads: [PACK-0001, NOREAD, PACK-0002], dcp: GI-01 }\n`,
    );
    const refused = () => Promise.reject(new Error('not used'));
    const app = buildApp(
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
      {
        logger: silentLogger(),
        api: {
          uploadScans: refused,
          requestPresignedUpload: refused,
          putPresigned: refused,
          getScanStatus: refused,
          close: async () => {},
        },
      },
    );
    await app.start();
    try {
      const db = new Database(join(dir, 'buffer.db'), { readonly: true });
      const outcomes = () =>
        db
          .prepare(
            `SELECT outcome, CAST(raw AS TEXT) AS raw FROM reads WHERE input_id = 'script' ORDER BY rowid`,
          )
          .all() as { outcome: string; raw: string }[];
      try {
        await waitFor(() => outcomes().length === 3, {
          what: 'the three scripted reads committed',
        });
        expect(outcomes()).toEqual([
          { outcome: 'scan', raw: 'PACK-0001' },
          { outcome: 'noRead', raw: 'NOREAD' },
          { outcome: 'scan', raw: 'PACK-0002' },
        ]);
      } finally {
        db.close();
      }
      const status = app.status();
      expect(status.inputs.find((i) => i.id === 'script')).toMatchObject({
        type: 'scripted',
        state: 'up',
      });
    } finally {
      await app.stop();
    }
  });

  it('parses a payload for try by its own rules', async () => {
    const { file } = site(`  - { id: script, type: scripted, dcp: GI-01 }\n`);
    const r = await runTry(file, Date.parse('2026-11-18T06:00:00Z'), [
      '--input',
      'script',
      '--json',
      '--payload',
      'PACK-0001\nPACK-0002\n',
    ]);
    expect(r.code).toBe(0);
    expect((JSON.parse(r.out) as TryResult[]).map((t) => [t.read, t.outcome])).toEqual([
      ['PACK-0001', 'scan'],
      ['PACK-0002', 'scan'],
    ]);
  });

  it('is checked by config check: a wrong key with its line, and the file it names', async () => {
    const typo = site(`  - id: script\n    type: scripted\n    reeds: [A]\n    dcp: GI-01\n`);
    const bad = await configCheck(typo.file);
    expect(bad.code).toBe(2);
    expect(bad.out).toContain(`${typo.file}:9:5: inputs[script].reeds: unknown key "reeds"`);

    const missing = site(
      `  - { id: script, type: scripted, scriptFile: ./no-such-file.txt, dcp: GI-01 }\n`,
    );
    const noFile = await configCheck(missing.file);
    expect(noFile.out).toMatch(/inputs\[script\]\.scriptFile: .*no-such-file\.txt/);

    const reads = join(missing.dir, 'reads.txt');
    writeFileSync(reads, 'PACK-0002\n');
    const fine = site(
      `  - { id: script, type: scripted, reads: [PACK-0001], scriptFile: ${reads}, dcp: GI-01 }\n`,
    );
    expect(await configCheck(fine.file)).toMatchObject({ code: 0 });
  });
});
