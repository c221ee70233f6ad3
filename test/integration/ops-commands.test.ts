import { chownSync, existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { registerOpsCommands } from '../../src/cli/ops-commands.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { runCli, type CliRun } from '../helpers/cli-in-process.js';

const GS = '\u001d';
const NOW = Date.parse('2026-11-18T12:00:00Z');

/** Runs one command line like src/main.ts does; answers the exit code and what was printed. */
function cli(dir: string, args: string[], uid?: number): Promise<CliRun> {
  return runCli(args, [registerOpsCommands], {
    cwd: dir,
    now: () => NOW,
    ...(uid !== undefined ? { uid } : {}),
  });
}

function scan(reference: string, dcpKey: string, raw = reference): IntakeRecord {
  const body = JSON.stringify({
    reference,
    timeStamp: '2026-11-18T12:00:00',
    dcpKey,
    productModelKey: 'PACK-A',
    parents: [],
    attributes: [],
  });
  return {
    inputId: 'line-3',
    receivedAt: new Date(NOW),
    raw: Buffer.from(raw),
    outcome: 'scan',
    scan: { reference, dcpKey, instant: new Date(NOW), body },
  };
}

describe('queue, failures, buffer stats, buffer backup', () => {
  let dir: string;
  let config: string;
  let store: BufferStore;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sg-ops-'));
    config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: s, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:1, authUrl: http://127.0.0.1:1, clientId: c }
buffer: { path: buffer.db }
dcps: [{ key: GI-01, kind: startOfProcess, productModelKey: PACK-A }, { key: EOL-3, kind: endOfProcess, productModelKey: PACK-A }]
inputs: []
`,
    );
    store = BufferStore.openAt(join(dir, 'buffer.db'));
    // A delivered batch with one failure, scans waiting (two hours, five minutes and seconds old), a rejection.
    store.intake.commitIntake(
      [scan('A-1', 'GI-01'), scan(`]d2010${GS}21B`, 'GI-01', `]d2010${GS}21B`)],
      NOW - 3_600_000,
    );
    const batch = formBatch(store, {
      mode: 'direct',
      maxScans: 10,
      maxBytes: 1_000_000,
      nowIso: new Date(NOW - 3_500_000).toISOString(),
    })!;
    store.batches.updateBatch(batch.id, { state: 'uploaded', requestId: '1723' });
    store.batches.finishBatch(
      batch.id,
      {
        state: 'HasFailures',
        processed: 2,
        failed: 1,
        failures: [{ reference: `]d2010${GS}21B`, reason: 'Invalid DCP' }],
      },
      new Date(NOW).toISOString(),
    );
    store.intake.commitIntake([scan('B-1', 'GI-01'), scan('B-2', 'EOL-3')], NOW - 7_200_000);
    store.intake.commitIntake([scan('C-1', 'EOL-3')], NOW - 300_000);
    store.intake.commitIntake([scan('D-1', 'EOL-3')], NOW - 5_000);
    store.intake.commitIntake(
      [
        {
          inputId: 'line-3',
          receivedAt: new Date(NOW),
          raw: Buffer.from([0x41, 0xff, 0x1d, 0x42]),
          outcome: 'rejected',
          reason: 'not a GS1 code',
          origin: { port: '/dev/ttyUSB0' },
        },
      ],
      NOW,
    );
  });
  afterEach(() => store.close());

  it('queue: waiting scans by DCP and age, and the unfinished batches', async () => {
    const json = await cli(dir, ['queue', '--config', config, '--json']);
    expect(json.code).toBe(0);
    const r = JSON.parse(json.out) as {
      totals: unknown;
      byDcp: unknown;
      byAge: { label: string; scans: number }[];
    };
    expect(r.totals).toEqual({ waiting: 4, inFlight: 0, oldestAgeMs: 7_200_000 });
    expect(r.byDcp).toEqual([
      { dcp: 'EOL-3', waiting: 3, inFlight: 0, oldestAgeMs: 7_200_000 },
      { dcp: 'GI-01', waiting: 1, inFlight: 0, oldestAgeMs: 7_200_000 },
    ]);
    expect(r.byAge.map((b) => b.scans)).toEqual([1, 1, 0, 2, 0]);
    const human = await cli(dir, ['queue', '--config', config]);
    expect(human.out).toContain(
      '4 scans waiting for delivery (4 not yet in a batch, 0 in batches not finished); oldest 2 h.',
    );
    expect(human.out).toMatch(/EOL-3 +3 +0 +2 h/);
  });

  it('failures: reasons counted, raw reads printable', async () => {
    const json = await cli(dir, ['failures', '--config', config, '--json']);
    const r = JSON.parse(json.out) as { reasons: unknown; latest: Record<string, unknown>[] };
    expect(r.reasons).toEqual([
      { kind: 'failed', reason: 'Invalid DCP', count: 1 },
      { kind: 'rejected', reason: 'not a GS1 code', count: 1 },
    ]);
    expect(r.latest[0]).toMatchObject({
      kind: 'rejected',
      raw: 'A\\xff<GS>B',
      reason: 'not a GS1 code',
    });
    expect(r.latest[1]).toMatchObject({
      kind: 'failed',
      dcp: 'GI-01',
      reference: `]d2010${GS}21B`,
      raw: ']d2010<GS>21B',
      requestId: '1723',
      product: 'PACK-A',
    });
    expect(r.latest[0]!.product).toBeNull();
    const human = await cli(dir, ['failures', '--config', config, '-n', '1']);
    expect(human.out).toContain('reason: not a GS1 code');
    expect(human.out).toContain('read:   A\\xff<GS>B');
    expect(human.out).not.toContain('Invalid DCP\n    read'); // limited to one
    expect((await cli(dir, ['failures', '--config', config])).out).toMatch(
      /failed +input line-3 {2}DCP GI-01 {2}product PACK-A {2}request 1723\n {4}reason: Invalid DCP/,
    );
    expect((await cli(dir, ['failures', '--config', config, '--limit', 'many'])).code).toBe(2);
  });

  it('failures --batch: the refused and held scans of one batch, without the rejected reads', async () => {
    const batchId = sqlOf(store).prepare('SELECT id FROM batches').pluck().get() as number;
    const one = await cli(dir, [
      'failures',
      '--batch',
      String(batchId),
      '--config',
      config,
      '--json',
    ]);
    expect(one.code).toBe(0);
    const r = JSON.parse(one.out) as { reasons: unknown; latest: Record<string, unknown>[] };
    expect(r.reasons).toEqual([{ kind: 'failed', reason: 'Invalid DCP', count: 1 }]);
    expect(r.latest).toHaveLength(1);
    expect(r.latest[0]).toMatchObject({ kind: 'failed', requestId: '1723', product: 'PACK-A' });
    const other = await cli(dir, ['failures', '--batch', String(batchId + 1), '--config', config]);
    expect(other.code).toBe(0);
    expect(other.out).toBe(
      `No failed or held scans of batch ${batchId + 1} in the buffer (replayed ones are not listed).\n`,
    );
    const bad = await cli(dir, ['failures', '--batch', '1723a', '--config', config]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--batch must be a batch id');
  });

  it('buffer stats', async () => {
    const r = JSON.parse(
      (await cli(dir, ['buffer', 'stats', '--config', config, '--json'])).out,
    ) as Record<string, unknown>;
    expect(r).toMatchObject({
      journalMode: 'wal',
      reads: { scan: 6, rejected: 1 },
      scans: { delivered: 1, failed: 1, pending: 4 },
      batches: { 'done:HasFailures': 1 },
    });
    expect((r.files as { total: number }).total).toBeGreaterThan(0);
    expect((await cli(dir, ['buffer', 'stats', '--config', config])).out).toContain('scans:     ');
  });

  it('buffer backup: a consistent, checked, self-contained copy while another connection keeps writing', async () => {
    let n = 0;
    const writer = setInterval(() => {
      store.intake.commitIntake(
        Array.from({ length: 50 }, () => scan(`W-${n++}`, 'GI-01')),
        Date.now(),
      );
    }, 2);
    let result;
    try {
      await new Promise((r) => setTimeout(r, 50));
      result = await cli(dir, ['buffer', 'backup', 'copy.db', '--config', config, '--json']);
    } finally {
      clearInterval(writer);
    }
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.out) as { file: string; integrity: string; scans: number };
    expect(summary).toMatchObject({ file: join(dir, 'copy.db'), integrity: 'ok' });
    expect(existsSync(join(dir, 'copy.db-wal'))).toBe(false);
    expect(existsSync(join(dir, 'copy.db.partial'))).toBe(false);
    const copy = new Database(join(dir, 'copy.db'), { readonly: true });
    try {
      expect(copy.pragma('journal_mode', { simple: true })).toBe('delete');
      const scans = copy.prepare('SELECT count(*) FROM scans').pluck().get() as number;
      expect(scans).toBe(summary.scans);
      expect(scans).toBeGreaterThan(6);
      // every group of 50 written in one transaction is in the copy whole, or not at all
      expect((scans - 6) % 50).toBe(0);
      // the copy can be read like the live buffer
      expect((await cli(dir, ['buffer', 'stats', '--buffer', 'copy.db', '--json'])).code).toBe(0);
    } finally {
      copy.close();
    }
    const again = await cli(dir, ['buffer', 'backup', 'copy.db', '--config', config]);
    expect(again.code).toBe(2);
    expect(again.err).toContain('exists; use --force');
    const forced = await cli(dir, ['buffer', 'backup', 'copy.db', '--config', config, '--force']);
    expect(forced.code).toBe(0);
    expect(forced.out).toMatch(/^Backed up .*buffer\.db to .*copy\.db: .* check ok/);
    // --force never replaces the live buffer (or its WAL) under the running gateway.
    const before = store.reports.scanCounts();
    for (const onto of ['buffer.db', './sub/../buffer.db', 'buffer.db-wal']) {
      const refused = await cli(dir, ['buffer', 'backup', onto, '--config', config, '--force']);
      expect(refused.code, onto).toBe(2);
      expect(refused.err).toContain('is the buffer itself');
    }
    expect(store.reports.scanCounts()).toEqual(before);
    expect(sqlOf(store).pragma('quick_check', { simple: true })).toBe('ok');
  });

  it('exit codes: 1 without a buffer, 2 for a bad configuration, 2 as root on a buffer that is not root’s', async () => {
    const missing = await cli(dir, ['queue', '--buffer', 'nope.db']);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('no buffer at');
    writeFileSync(join(dir, 'bad.yaml'), 'site: [\n');
    expect((await cli(dir, ['queue', '--config', join(dir, 'bad.yaml')])).code).toBe(2);
    store.close();
    chownSync(join(dir, 'buffer.db'), 4321, 4321);
    const asRoot = await cli(dir, ['queue', '--config', config], 0);
    expect(asRoot.code).toBe(2);
    expect(asRoot.err).toContain('belongs to uid 4321; run this as that user');
    expect(existsSync(join(dir, 'buffer.db-wal'))).toBe(false);
  });

  it('every command has --help with an example', async () => {
    for (const args of [['queue'], ['failures'], ['buffer', 'stats'], ['buffer', 'backup']]) {
      const help = await cli(dir, [...args, '--help']);
      expect(help.code).toBe(0);
      expect(help.out).toMatch(/Examples?:/);
      expect(help.out).toContain('--json');
      expect(help.out).toContain('Exit codes:');
    }
  });
});
