import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { CommandExit } from '../../src/cli/exit.js';
import { registerOpsCommands } from '../../src/cli/ops-commands.js';
import { registerTraceCommand } from '../../src/cli/trace-command.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { sqlOf } from '../helpers/buffer-sql.js';

/**
 * `scan-gateway buffer prune --before DATE` on a real SQLite buffer: delivered scans read before
 * the date go, undelivered ones of the same age and delivered ones read after it stay, and
 * `trace` of a pruned item names the prune.
 */
const NOW = Date.parse('2026-12-01T12:00:00Z');
const OLD = Date.parse('2026-10-01T08:00:00Z');
const NEW = Date.parse('2026-11-20T08:00:00Z');

function scan(reference: string, at: number): IntakeRecord {
  return {
    inputId: 'in',
    receivedAt: new Date(at),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: {
      reference,
      dcpKey: 'GI-01',
      instant: new Date(at),
      body: JSON.stringify({ reference }),
    },
  };
}

function delivered(s: BufferStore, refs: string[], at: number): void {
  s.intake.commitIntake(
    refs.map((r) => scan(r, at)),
    at,
  );
  const b = formBatch(s, {
    maxScans: 10_000,
    maxBytes: 1e9,
    mode: 'direct',
    nowIso: new Date(at).toISOString(),
  })!;
  s.batches.updateBatch(b.id, { state: 'uploaded', requestId: String(b.id) });
  s.batches.finishBatch(b.id, { state: 'Success', failures: [] }, new Date(at).toISOString());
}

async function cli(
  register: (program: Command, io: Parameters<typeof registerOpsCommands>[1]) => void,
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
  register(program, { stdout, stderr, cwd: dir, env: {}, now: () => NOW });
  let code = 0;
  try {
    await program.parseAsync(['node', 'scan-gateway', ...args]);
  } catch (e) {
    if (e instanceof CommandExit) code = e.exitCode;
    else throw e;
  }
  return { code, out, err };
}

describe('scan-gateway buffer prune --before', () => {
  it('deletes only delivered scans read before the date, says what, and trace explains a pruned item', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-prune-cli-'));
    const file = join(dir, 'buffer.db');
    const s = BufferStore.openAt(file);
    delivered(s, ['OLD-1', 'OLD-2', 'OLD-3'], OLD);
    delivered(s, ['NEW-1', 'NEW-2'], NEW);
    // Undelivered and as old as the pruned ones: never pruned.
    s.intake.commitIntake([scan('WAITING-1', OLD)], OLD);
    s.close();

    const r = await cli(registerOpsCommands, dir, [
      'buffer',
      'prune',
      '--before',
      '2026-11-01',
      '--buffer',
      file,
      '--json',
    ]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({
      buffer: file,
      before: '2026-11-01T00:00:00.000Z',
      scans: 3,
      deadLetters: 0,
      reads: 3,
      batches: 1,
      firstReadAt: new Date(OLD).toISOString(),
      lastReadAt: new Date(OLD).toISOString(),
    });

    const check = BufferStore.openAt(file);
    try {
      const refs = sqlOf(check)
        .prepare(`SELECT reference FROM scan_rows ORDER BY reference`)
        .pluck()
        .all();
      expect(refs).toEqual(['NEW-1', 'NEW-2', 'WAITING-1']);
      expect(sqlOf(check).pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      check.close();
    }

    const t = await cli(registerTraceCommand, dir, ['trace', 'OLD-2', '--buffer', file]);
    expect(t.code).toBe(1);
    expect(t.out).toContain('OLD-2: not in the buffer');
    expect(t.out).toMatch(
      /Scans of OLD-2 were pruned early at .*because plant IT pruned by hand the delivered scans read before 2026-11-01T00:00:00.000Z/,
    );
    const kept = await cli(registerTraceCommand, dir, ['trace', 'NEW-1', '--buffer', file]);
    expect(kept.code).toBe(0);
    expect(kept.out).not.toContain('pruned early');

    // Again: nothing left that old.
    const again = await cli(registerOpsCommands, dir, [
      'buffer',
      'prune',
      '--before',
      '2026-11-01',
      '--buffer',
      file,
    ]);
    expect(again.code).toBe(0);
    expect(again.out).toContain('nothing pruned');
  });

  it('refuses a date that is no date or in the future, and changes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-prune-cli-'));
    const file = join(dir, 'buffer.db');
    const s = BufferStore.openAt(file);
    delivered(s, ['OLD-1'], OLD);
    s.close();
    for (const before of ['yesterday', '2027-01-01']) {
      const r = await cli(registerOpsCommands, dir, [
        'buffer',
        'prune',
        '--before',
        before,
        '--buffer',
        file,
      ]);
      expect(r.code, before).toBe(2);
      expect(r.err).toMatch(/--before/);
    }
    const check = BufferStore.openAt(file);
    try {
      expect(sqlOf(check).prepare(`SELECT count(*) FROM scan_rows`).pluck().get()).toBe(1);
    } finally {
      check.close();
    }
  });
});
