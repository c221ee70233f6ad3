import { createHash } from 'node:crypto';
import {
  copyFile,
  mkdtemp,
  open,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { filesInputSchema, type FilesInputConfig } from '../../src/inputs/files/schema.js';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { parseConfigText } from '../../src/config/load.js';
import { FilesInput } from '../../src/inputs/files/files-input.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { silentLogger } from '../../src/log.js';
import { waitFor } from '../helpers/wait.js';
import { samplePath } from '../helpers/samples.js';
import { FakeSink } from '../helpers/fake-sink.js';
import { sqlOf } from '../helpers/buffer-sql.js';

const SAMPLE_CSV = samplePath('goods-in-export.csv');
const GS = '\x1d';
/** Fixed clock: 07:00 local on 18 Nov 2026, so files land in processed/2026-11-18. */
const NOW = new Date(2026, 10, 18, 7, 0, 0);
const DAY = '2026-11-18';
const STABLE_MS = 300;

let root: string;
let dir: string;
let sink: FakeSink;
const inputs: FilesInput[] = [];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sg-files-input-'));
  dir = join(root, 'drop');
  sink = new FakeSink();
});

afterEach(async () => {
  for (const input of inputs.splice(0)) await input.stop();
  await rm(root, { recursive: true, force: true });
});

function config(overrides: Partial<FilesInputConfig> = {}): FilesInputConfig {
  return filesInputSchema.parse({
    id: 'drop-1',
    dcp: 'GI',
    type: 'files',
    dir,
    stableMs: STABLE_MS,
    ...overrides,
  });
}

async function startInput(
  overrides: Partial<FilesInputConfig> = {},
  retryBaseMs = 100,
): Promise<FilesInput> {
  const input = new FilesInput({
    config: config(overrides),
    sink,
    logger: silentLogger(),
    now: () => NOW.getTime(),
    retryBaseMs,
    retryMaxMs: 400,
    folderCheckMs: 100,
  });
  inputs.push(input);
  await input.start();
  return input;
}

const processed = (name: string): string => join(dir, 'processed', DAY, name);

/** SHA-256 (hex) of content, as the input puts it in each read's origin. */
const sha = (content: string | Buffer): string =>
  createHash('sha256').update(content).digest('hex');

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Gives the watcher time to (wrongly) pick something up, for "is ignored" and "read once" checks. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, STABLE_MS * 3));

describe('FilesInput (csv)', () => {
  it('ingests the goods-in sample as 5 reads in one submit, then moves it to processed/<date>/', async () => {
    const input = await startInput({ format: 'csv', timeColumn: 'read_at' });
    expect(input.status()).toEqual({ id: 'drop-1', type: 'files', state: 'up', source: dir });
    await copyFile(SAMPLE_CSV, join(dir, 'goods-in-export.csv'));

    await waitFor(
      async () => sink.commits.length === 1 && (await exists(processed('goods-in-export.csv'))),
      { what: 'sample ingested and moved' },
    );
    expect(sink.raws()).toEqual([
      ']C100095212345678901235400PO-4711',
      `]d2010952123454321310B2611-03${GS}21C2611030001234`,
      `]d2010952123454321310B2611-03${GS}21C2611030001235`,
      ']d1C24A0K3B0712345',
      `]d20109521234543214${GS}10LOT`,
    ]);
    const reads = (sink.commits[0] ?? []).map((i) => (i.kind === 'read' ? i.read : undefined));
    expect(reads.map((r) => r?.sourceTime)).toEqual([
      '2026-11-18T06:58:12+01:00',
      '2026-11-18T06:58:40+01:00',
      '2026-11-18T06:58:41+01:00',
      '2026-11-18T06:59:03+01:00',
      '2026-11-18T06:59:30+01:00',
    ]);
    const sha256 = sha(await readFile(SAMPLE_CSV));
    expect(reads.map((r) => r?.origin)).toEqual(
      [2, 3, 4, 5, 6].map((line) => ({ file: 'goods-in-export.csv', line, sha256 })),
    );
    expect(
      reads.every((r) => r?.inputId === 'drop-1' && r.receivedAt.getTime() === NOW.getTime()),
    ).toBe(true);
    expect(await readFile(processed('goods-in-export.csv'))).toEqual(await readFile(SAMPLE_CSV));
    expect(await exists(join(dir, 'goods-in-export.csv'))).toBe(false);
  });

  it('moves a CSV without the barcode column to failed/ with <name>.error.txt, submitting only its rejection', async () => {
    await startInput({ format: 'csv' });
    await writeFile(join(dir, 'wrong.csv'), 'read_at,code\n2026-11-18T06:58:12+01:00,ABC\n');

    await waitFor(() => exists(join(dir, 'failed', 'wrong.csv.error.txt')), {
      what: 'error file written',
    });
    expect(await readFile(join(dir, 'failed', 'wrong.csv'), 'utf8')).toBe(
      'read_at,code\n2026-11-18T06:58:12+01:00,ABC\n',
    );
    expect(await readFile(join(dir, 'failed', 'wrong.csv.error.txt'), 'utf8')).toContain(
      'reason: CSV header has no column "barcode" (barcodeColumn); header columns: "read_at", "code"',
    );
    expect(await exists(join(dir, 'wrong.csv'))).toBe(false);
    expect(sink.commits).toHaveLength(1);
    expect(sink.texts()).toEqual([
      '<CSV header has no column "barcode" (barcodeColumn); header columns: "read_at", "code"|read_at,code\n2026-11-18T06:58:12+01:00,ABC\n>',
    ]);
  });

  it('submits rows without a barcode as rejections together with the good rows', async () => {
    await startInput({ format: 'csv' });
    const content = 'barcode,station\nA1,GI-01\n,GI-01\nB2,GI-02\n';
    const sha256 = sha(content);
    await writeFile(join(dir, 'gaps.csv'), content);
    await waitFor(() => exists(processed('gaps.csv')), { what: 'gaps.csv processed' });
    expect(sink.commits).toHaveLength(1);
    expect(
      (sink.commits[0] ?? []).map((i) => [
        i.kind,
        i.kind === 'read' ? i.read.origin : i.rejection.origin,
      ]),
    ).toEqual([
      ['read', { file: 'gaps.csv', line: 2, sha256 }],
      ['rejection', { file: 'gaps.csv', line: 3, sha256 }],
      ['read', { file: 'gaps.csv', line: 4, sha256 }],
    ]);
  });

  it('leaves the file in place while the sink refuses it and ingests it once when the sink works again', async () => {
    sink.failing = true;
    await startInput({ format: 'csv' });
    await writeFile(join(dir, 'later.csv'), 'barcode\nA1\nA2\n');

    await waitFor(() => sink.refused >= 2, { what: 'two refused submits (retried with backoff)' });
    expect(await readFile(join(dir, 'later.csv'), 'utf8')).toBe('barcode\nA1\nA2\n');
    expect(await readdir(join(dir, 'processed'))).toEqual([]);
    expect(await readdir(join(dir, 'failed'))).toEqual([]);

    sink.failing = false;
    await waitFor(() => exists(processed('later.csv')), {
      what: 'later.csv processed after the sink recovered',
    });
    await settle();
    expect(sink.commits).toHaveLength(1);
    expect(sink.raws()).toEqual(['A1', 'A2']);
  });
});

describe('FilesInput (lines)', () => {
  it('ingests one barcode per line (CRLF and LF, blank lines skipped) with file and line', async () => {
    await startInput();
    const content = Buffer.from(
      `]d2010952123454321310B2611-03${GS}21C1\r\n\r\nNOREAD\nX2\n`,
      'latin1',
    );
    const sha256 = sha(content);
    await writeFile(join(dir, 'scans.txt'), content);
    await waitFor(() => exists(processed('scans.txt')), { what: 'scans.txt processed' });
    expect(sink.raws()).toEqual([`]d2010952123454321310B2611-03${GS}21C1`, 'NOREAD', 'X2']);
    expect(
      (sink.commits[0] ?? []).map((i) => (i.kind === 'read' ? i.read.origin : undefined)),
    ).toEqual([
      { file: 'scans.txt', line: 1, sha256 },
      { file: 'scans.txt', line: 3, sha256 },
      { file: 'scans.txt', line: 4, sha256 },
    ]);
  });

  it('reads a file written slowly in several chunks once, whole, after writing finished', async () => {
    // The writer pauses 150 ms between chunks; stableMs is twenty times that, so that a loaded
    // machine stretching a pause does not make the file look finished. The writing as a whole
    // lasts longer than stableMs: the file is never still that long, not merely written fast.
    const stableMs = 3000;
    await startInput({ stableMs });
    const handle = await open(join(dir, 'slow.txt'), 'w');
    const lines = Array.from({ length: 25 }, (_, i) => `L-${String(i).padStart(2, '0')}`);
    const text = lines.map((l) => `${l}\n`).join('');
    // 25 chunks of 5 characters, each ending in the middle of a line.
    const chunks = Array.from({ length: 25 }, (_, i) =>
      text.slice(Math.max(0, i * 5 - 2), i === 24 ? undefined : i * 5 + 3),
    );
    const started = Date.now();
    for (const chunk of chunks) {
      await handle.write(chunk);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    await handle.close();
    expect(Date.now() - started).toBeGreaterThan(stableMs);

    await waitFor(() => exists(processed('slow.txt')), { what: 'slow.txt processed' });
    await settle();
    expect(sink.commits).toHaveLength(1);
    expect(sink.raws()).toEqual(lines);
  });

  it('ignores .tmp, .part and dotfiles, and takes a .tmp once it is renamed', async () => {
    await startInput();
    await writeFile(join(dir, 'upload.tmp'), 'T1\n');
    await writeFile(join(dir, 'upload.PART'), 'P1\n');
    await writeFile(join(dir, '.hidden'), 'H1\n');
    await settle();
    expect(sink.commits).toEqual([]);
    expect((await readdir(dir)).sort()).toEqual([
      '.hidden',
      'failed',
      'processed',
      'upload.PART',
      'upload.tmp',
    ]);

    await rename(join(dir, 'upload.tmp'), join(dir, 'upload.txt'));
    await waitFor(() => exists(processed('upload.txt')), { what: 'renamed file processed' });
    expect(sink.raws()).toEqual(['T1']);
  });

  it('takes files already in the folder at start, oldest first, one submit each', async () => {
    await rm(dir, { recursive: true, force: true });
    await (await import('node:fs/promises')).mkdir(dir, { recursive: true });
    const t = Date.now() / 1000 - 3600;
    for (const [name, age] of [
      ['b.txt', 10],
      ['a.txt', 30],
      ['c.txt', 20],
    ] as const) {
      await writeFile(join(dir, name), `${name}\n`);
      await utimes(join(dir, name), t - age, t - age);
    }
    await startInput();
    await waitFor(() => sink.commits.length === 3, { what: 'three files ingested' });
    expect(
      sink.commits.map((c) => c.map((i) => (i.kind === 'read' ? i.read.raw.toString() : '?'))),
    ).toEqual([['a.txt'], ['c.txt'], ['b.txt']]);
    await waitFor(async () => (await readdir(join(dir, 'processed', DAY))).length === 3, {
      what: 'all three moved',
    });
  });

  it('keeps both files when the same name is dropped twice (numeric suffix in processed/)', async () => {
    await startInput();
    await writeFile(join(dir, 'same.txt'), 'ONE\n');
    await waitFor(() => exists(processed('same.txt')), { what: 'first copy processed' });
    await writeFile(join(dir, 'same.txt'), 'TWO\n');
    await waitFor(() => exists(processed('same-1.txt')), { what: 'second copy processed' });
    expect(await readFile(processed('same.txt'), 'utf8')).toBe('ONE\n');
    expect(await readFile(processed('same-1.txt'), 'utf8')).toBe('TWO\n');
    expect(sink.commits.map((c) => c.length)).toEqual([1, 1]);
  });

  it('works with polling (network shares)', async () => {
    await startInput({ usePolling: true });
    await writeFile(join(dir, 'polled.txt'), 'P1\nP2\n');
    await waitFor(() => exists(processed('polled.txt')), {
      what: 'polled file processed',
      timeoutMs: 30_000,
    });
    expect(sink.raws()).toEqual(['P1', 'P2']);
  });

  it('stop() waits for a submit in flight and still moves that file', async () => {
    const input = await startInput();
    sink.delayMs = 500;
    await writeFile(join(dir, 'inflight.txt'), 'F1\n');
    await waitFor(() => sink.started === 1, { what: 'submit started' });
    expect(sink.commits).toEqual([]);
    await input.stop();
    expect(input.status().state).toBe('stopped');
    expect(sink.raws()).toEqual(['F1']);
    expect(await exists(processed('inflight.txt'))).toBe(true);
  });

  it('is down with the reason while the folder cannot be created, and comes up once it can', async () => {
    await writeFile(dir, 'a file where the folder should be');
    const input = await startInput({}, 50);
    expect(input.status()).toMatchObject({ state: 'down', source: dir });
    expect(input.status().lastError).toMatch(/EEXIST|ENOTDIR/);

    await rm(dir);
    await waitFor(() => input.status().state === 'up', {
      what: 'input up after the folder became possible',
    });
    await writeFile(join(dir, 'after.txt'), 'OK\n');
    await waitFor(() => exists(processed('after.txt')), { what: 'file processed after recovery' });
    expect(sink.raws()).toEqual(['OK']);
  });
});

describe('FilesInput (folder lost)', () => {
  it('notices the folder being removed while running and recreates it', async () => {
    const input = await startInput({}, 50);
    await rm(dir, { recursive: true, force: true });
    await waitFor(
      async () => input.status().state === 'up' && (await exists(join(dir, 'processed'))),
      {
        what: 'folder recreated and input up',
      },
    );
    await writeFile(join(dir, 'again.txt'), 'AGAIN\n');
    await waitFor(() => exists(processed('again.txt')), {
      what: 'file processed in the recreated folder',
    });
    expect(sink.raws()).toEqual(['AGAIN']);
  });
});

describe('FilesInput (large file)', () => {
  it('reads a 50 MB CSV written slowly in chunks once, whole, after its last write, committed in chunks of 2000 rows', async () => {
    // stableMs ten times the writer's pauses: building and writing a block on a loaded machine
    // adds to each pause, and must not make the file look finished.
    await startInput({ format: 'csv', timeColumn: 'read_at', stableMs: 3000 }, 100);
    const rows = 560_000;
    const path = join(dir, 'big.csv');
    const handle = await open(path, 'w');
    await handle.write('read_at,station,barcode,supplier,delivery_note\n');
    const block: string[] = [];
    for (let i = 0; i < rows; i++) {
      block.push(
        `2026-11-18T06:58:12+01:00,GI-01,]d2010952123454321310B2611-03${GS}21C${String(i).padStart(10, '0')},SUP-0042,DN-88121\n`,
      );
      if (block.length === 10_000) {
        await handle.write(block.join(''));
        block.length = 0;
        // A slow writer (a share, a PC exporting): pauses shorter than stableMs between chunks.
        if (i % 100_000 === 99_999) await new Promise((resolve) => setTimeout(resolve, 150));
      }
    }
    await handle.close();
    expect((await stat(path)).size).toBeGreaterThan(50 * 1000 * 1000);

    await waitFor(() => exists(processed('big.csv')), {
      what: 'big.csv processed',
      timeoutMs: 120_000,
      intervalMs: 200,
    });
    expect(sink.commits).toHaveLength(Math.ceil(rows / 2000));
    expect(sink.commits.every((c) => c.length <= 2000)).toBe(true);
    const commit = sink.items;
    expect(commit).toHaveLength(rows);
    const last = commit[rows - 1];
    expect(last?.kind === 'read' && last.read.raw.toString('latin1')).toBe(
      `]d2010952123454321310B2611-03${GS}21C${String(rows - 1).padStart(10, '0')}`,
    );
    expect(last?.kind === 'read' && last.read.origin).toEqual({
      file: 'big.csv',
      line: rows + 1,
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
  }, 180_000);
});

describe('FilesInput (same content twice)', () => {
  it('ingests a file dropped again with the same content once, under any name, and says so in the ledger', async () => {
    await startInput();
    await writeFile(join(dir, 'first.txt'), 'DUP-1\nDUP-2\n');
    await waitFor(() => exists(processed('first.txt')), { what: 'first processed' });
    await writeFile(join(dir, 'again.txt'), 'DUP-1\nDUP-2\n');
    await waitFor(() => exists(processed('again.txt')), { what: 'second copy moved to processed' });
    await writeFile(join(dir, 'first.txt'), 'DUP-1\nDUP-2\n');
    await waitFor(() => exists(processed('first-1.txt')), {
      what: 'third copy moved to processed',
    });
    // Stored once; each copy after it is counted as a rejection naming the first.
    expect(sink.texts()).toEqual([
      'DUP-1',
      'DUP-2',
      `<same content as first.txt stored at ${NOW.toISOString()}; not stored again|DUP-1\nDUP-2\n>`,
      `<same content as first.txt stored at ${NOW.toISOString()}; not stored again|DUP-1\nDUP-2\n>`,
    ]);
    const ledger = JSON.parse(await readFile(join(dir, '.ingested.json'), 'utf8')) as {
      files: Record<string, { name: string }>;
    };
    expect(ledger.files[sha('DUP-1\nDUP-2\n')]).toMatchObject({ name: 'first.txt' });
  });

  it('does not ingest again a file left in the folder by a crash between commit and move (next start)', async () => {
    const input = await startInput();
    await writeFile(join(dir, 'crash.txt'), 'C-1\n');
    await waitFor(() => exists(processed('crash.txt')), { what: 'processed' });
    await input.stop();
    inputs.splice(inputs.indexOf(input), 1);
    // As if the gateway died after the commit, before the move: the file is still in the folder.
    await copyFile(processed('crash.txt'), join(dir, 'crash.txt'));
    await startInput();
    await waitFor(() => exists(processed('crash-1.txt')), { what: 'left-over file moved' });
    expect(sink.texts()).toEqual([
      'C-1',
      `<same content as crash.txt stored at ${NOW.toISOString()}; not stored again|C-1\n>`,
    ]);
  });

  it('ingests the same content again when rememberFilesDays is 0', async () => {
    await startInput({ rememberFilesDays: 0 });
    await writeFile(join(dir, 'a.txt'), 'SAME\n');
    await waitFor(() => exists(processed('a.txt')));
    await writeFile(join(dir, 'b.txt'), 'SAME\n');
    await waitFor(() => exists(processed('b.txt')));
    expect(sink.commits).toHaveLength(2);
  });
});

describe('FilesInput (json formats, pause)', () => {
  it('takes ndjson reads with DCP, parents and attributes; a bad line becomes a rejection with its line', async () => {
    await startInput({
      format: 'ndjson',
      fields: {
        code: 'code',
        time: 'ts',
        dcp: 'station',
        parents: 'parent',
        attributes: 'attributes',
      },
    });
    await writeFile(
      join(dir, 'reads.ndjson'),
      [
        '{"code":"N-1","ts":"2026-11-18T07:00:00Z","station":"EOL-3","parent":"MOD-1","attributes":{"v":3.5}}',
        '{"code":',
        '',
        '{"ts":"x"}',
        '{"code":"N-2"}',
      ].join('\n'),
    );
    await waitFor(() => exists(processed('reads.ndjson')));
    const items = sink.commits[0] ?? [];
    expect(
      items.map((i) =>
        i.kind === 'read'
          ? i.read.raw.toString()
          : `${i.rejection.origin?.['line']}:${i.rejection.reason}`,
      ),
    ).toEqual([
      'N-1',
      expect.stringMatching(/^2:line is not JSON/),
      '4:field "code" is missing',
      'N-2',
    ]);
    expect(items[0]).toMatchObject({
      read: {
        sourceTime: '2026-11-18T07:00:00Z',
        dcpKey: 'EOL-3',
        parents: ['MOD-1'],
        attributes: { v: '3.5' },
      },
    });
  });

  it('takes a json array of reads, and moves a file that is not a JSON array to failed/', async () => {
    await startInput({ format: 'json' });
    await writeFile(
      join(dir, 'reads.json'),
      JSON.stringify([{ code: 'J-1' }, { code: 42 }, { code: 'J-2', dcp: 'GI-02' }]),
    );
    await waitFor(() => exists(processed('reads.json')));
    expect(
      sink.commits[0]?.map((i) => (i.kind === 'read' ? i.read.raw.toString() : i.rejection.reason)),
    ).toEqual(['J-1', 'field "code" must be text, got number 42', 'J-2']);
    await writeFile(join(dir, 'object.json'), '{"code":"J-3"}');
    await waitFor(() => exists(join(dir, 'failed', 'object.json.error.txt')));
    expect(await readFile(join(dir, 'failed', 'object.json.error.txt'), 'utf8')).toMatch(
      /must hold an array of reads/,
    );
  });

  it('leaves new files in the folder while paused and takes them on resume', async () => {
    const input = await startInput();
    input.setPaused(true);
    expect(input.status().state).toBe('paused');
    await writeFile(join(dir, 'held.txt'), 'H-1\n');
    await settle();
    expect(sink.commits).toHaveLength(0);
    expect(await exists(join(dir, 'held.txt'))).toBe(true);
    input.setPaused(false);
    await waitFor(() => exists(processed('held.txt')));
    expect(sink.raws()).toEqual(['H-1']);
    expect(input.status().state).toBe('up');
  });
});

describe('FilesInput through the real intake and SQLite', () => {
  it('commits 997 scans and 3 rejections (with file and line) for a CSV of 1,000 rows with 3 bad ones', async () => {
    const yaml = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps: [{ key: GI, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }]
inputs: [{ id: drop-1, type: files, dir: ${dir}, dcp: GI }]
`;
    const store = BufferStore.openAt(join(root, 'buffer.db'));
    const intake = new Intake({
      store,
      mapping: mappingContext(parseConfigText(yaml, 'test.yaml')),
      logger: silentLogger(),
    });
    intake.open();
    const input = new FilesInput({
      config: config({ format: 'csv', timeColumn: 'read_at' }),
      sink: intake,
      logger: silentLogger(),
      now: () => NOW.getTime(),
    });
    inputs.push(input);
    await input.start();
    const bad = new Set([10, 500, 999]);
    const lines = ['read_at,barcode'];
    for (let i = 0; i < 1000; i++)
      lines.push(
        bad.has(i)
          ? '2026-11-18T07:00:00+01:00,'
          : `2026-11-18T07:00:00+01:00,CELL-${String(i).padStart(4, '0')}`,
      );
    await writeFile(join(dir, 'thousand.csv'), lines.join('\r\n') + '\r\n');
    try {
      await waitFor(() => exists(processed('thousand.csv')), { what: 'thousand.csv processed' });
      const counts = sqlOf(store)
        .prepare(`SELECT outcome, count(*) AS n FROM reads GROUP BY outcome ORDER BY outcome`)
        .all();
      expect(counts).toEqual([
        { outcome: 'rejected', n: 3 },
        { outcome: 'scan', n: 997 },
      ]);
      expect(sqlOf(store).prepare('SELECT count(*) FROM scans').pluck().get()).toBe(997);
      const origins = (
        sqlOf(store)
          .prepare(`SELECT origin FROM reads WHERE outcome = 'rejected' ORDER BY id`)
          .pluck()
          .all() as string[]
      ).map((o) => JSON.parse(o) as { file: string; line: number });
      expect(origins.map((o) => [o.file, o.line])).toEqual([
        ['thousand.csv', 12],
        ['thousand.csv', 502],
        ['thousand.csv', 1001],
      ]);
    } finally {
      await input.stop();
      inputs.splice(inputs.indexOf(input), 1);
      intake.close();
      store.close();
    }
  });

  it('does not store a file again when the crash came after the commit but before the ledger write (hash in the commit)', async () => {
    const yaml = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps: [{ key: GI, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }]
inputs: [{ id: drop-1, type: files, dir: ${dir}, dcp: GI }]
`;
    const store = BufferStore.openAt(join(root, 'buffer.db'));
    const intake = new Intake({
      store,
      mapping: mappingContext(parseConfigText(yaml, 'test.yaml')),
      logger: silentLogger(),
    });
    intake.open();
    const reads = (): number =>
      sqlOf(store).prepare('SELECT count(*) FROM reads').pluck().get() as number;
    try {
      const first = new FilesInput({
        config: config(),
        sink: intake,
        logger: silentLogger(),
        now: () => NOW.getTime(),
      });
      inputs.push(first);
      await first.start();
      await writeFile(join(dir, 'w.txt'), 'W-1\nW-2\n');
      await waitFor(() => exists(processed('w.txt')));
      await first.stop();
      inputs.splice(inputs.indexOf(first), 1);
      expect(reads()).toBe(2);
      // As if the gateway died after the commit, before the ledger write and the move: the file is
      // back in the folder and no ledger knows it. The buffer's record of the hash does.
      await rm(join(dir, '.ingested.json'));
      await copyFile(processed('w.txt'), join(dir, 'w.txt'));
      const second = new FilesInput({
        config: config(),
        sink: intake,
        logger: silentLogger(),
        now: () => NOW.getTime(),
      });
      inputs.push(second);
      await second.start();
      await waitFor(() => exists(processed('w-1.txt')), { what: 'left-over file moved' });
      expect(reads()).toBe(2);
    } finally {
      for (const input of inputs.splice(0)) await input.stop();
      intake.close();
      store.close();
    }
  });
});
