import { copyFile, mkdtemp, open, readFile, rm, stat, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { filesInputSchema, type FilesInputConfig } from '../../src/inputs/files/schema.js';
import { FilesInput } from '../../src/inputs/files/files-input.js';
import type { FileChunk, FileRecord, FileSink } from '../../src/inputs/files/file-sink.js';
import type { IntakeItem } from '../../src/inputs/types.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A writer that pauses longer than stableMs gets its file taken early and moved to
 * processed/, and goes on appending to the moved file. The appended lines must not be lost.
 */

const NOW = new Date(2026, 10, 22, 3, 0, 0);
const DAY = '2026-11-22';
const STABLE_MS = 300;
/** Long beside PAUSE_MS: a loaded machine may stretch a writer's pause, and the watch must outlast it. */
const GROWTH_WATCH_MS = 4000;
/** A writer's pause: longer than stableMs, so the file is taken in between (a slow machine only makes it longer). */
const PAUSE_MS = 800;

/** Records every submit with the file (or chunk) it was submitted with; knows no file's progress. */
class RecordingSink implements FileSink {
  readonly commits: { items: IntakeItem[]; file?: FileRecord; chunk?: FileChunk }[] = [];
  async submit(items: IntakeItem[]): Promise<void> {
    this.commits.push({ items });
  }
  async submitFile(items: IntakeItem[], file: FileRecord): Promise<void> {
    this.commits.push({ items, file });
  }
  async submitChunk(items: IntakeItem[], chunk: FileChunk): Promise<void> {
    this.commits.push({ items, chunk });
  }
  fileProgress(): undefined {
    return undefined;
  }
  get items(): IntakeItem[] {
    return this.commits.flatMap((c) => c.items);
  }
  /** Reads as `raw@line`, rejections as `<reason|raw>`. */
  texts(): string[] {
    return this.items.map((i) =>
      i.kind === 'read'
        ? `${i.read.raw.toString('latin1')}@${String(i.read.origin?.['line'])}`
        : `<${i.rejection.reason}|${i.rejection.raw.toString('latin1')}>`,
    );
  }
}

let root: string;
let dir: string;
let sink: RecordingSink;
let logLines: string[];
const inputs: FilesInput[] = [];
const handles: FileHandle[] = [];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sg-files-growth-'));
  dir = join(root, 'in');
  sink = new RecordingSink();
  logLines = [];
});

afterEach(async () => {
  for (const handle of handles.splice(0)) await handle.close().catch(() => undefined);
  for (const input of inputs.splice(0)) await input.stop();
  await rm(root, { recursive: true, force: true });
});

async function startInput(overrides: Partial<FilesInputConfig> = {}): Promise<FilesInput> {
  const log = memoryLogger('info');
  logLines = log.lines;
  const input = new FilesInput({
    config: filesInputSchema.parse({
      id: 'drop-1',
      dcp: 'GI',
      type: 'files',
      dir,
      stableMs: STABLE_MS,
      ...overrides,
    }),
    sink,
    logger: log.logger,
    now: () => NOW.getTime(),
    growthWatchMs: GROWTH_WATCH_MS,
  });
  inputs.push(input);
  await input.start();
  return input;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const processed = (name: string): string => join(dir, 'processed', DAY, name);
const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );
const warnings = (): string[] =>
  logLines
    .map((l) => JSON.parse(l) as { level: number; msg: string })
    .filter((l) => l.level === 40)
    .map((l) => l.msg);

/** Opens `name` for writing and keeps the handle, as `exec 3>in/name` does. */
async function writer(name: string): Promise<FileHandle> {
  const handle = await open(join(dir, name), 'w');
  handles.push(handle);
  return handle;
}

describe('a file still being written when it was taken', () => {
  it('csv: stores the lines appended to the moved file, with the header, each part once with its own hash', async () => {
    await startInput({ format: 'csv', timeColumn: 'read_at' });
    // ( exec 3>in/slow1.csv; printf 'read_at,barcode\n' >&3; for i in 1..5; do printf '…,SLOWA-%d\n' $i >&3; sleep; done )
    const fd = await writer('slow1.csv');
    await fd.write('read_at,barcode\n');
    for (let i = 1; i <= 5; i++) {
      await fd.write(`2026-11-22T03:00:00,SLOWA-${i}\n`);
      await sleep(PAUSE_MS);
    }
    await fd.close();

    await waitFor(() => sink.items.length === 5, {
      what: 'all five rows stored',
      timeoutMs: 30_000,
    });
    expect(await exists(processed('slow1.csv'))).toBe(true);
    expect(sink.texts()).toEqual(['SLOWA-1@2', 'SLOWA-2@3', 'SLOWA-3@4', 'SLOWA-4@5', 'SLOWA-5@6']);
    expect(
      sink.items.every((i) => i.kind === 'read' && i.read.sourceTime === '2026-11-22T03:00:00'),
    ).toBe(true);
    expect(sink.commits.length).toBeGreaterThan(1);
    const hashes = sink.commits.map((c) => c.file?.hash);
    expect(new Set(hashes).size).toBe(hashes.length);
    expect(warnings().some((m) => /file grew after it was taken/.test(m))).toBe(true);

    // The whole file dropped again: its content is known (the last part's hash covers the file).
    await waitFor(() => inputs[0] !== undefined);
    await copyFile(processed('slow1.csv'), join(dir, 'slow1-again.csv'));
    await waitFor(() => exists(processed('slow1-again.csv')));
    await waitFor(() => sink.items.length === 6);
    expect(sink.texts()[5]).toMatch(
      /^<same content as slow1\.csv \(bytes \d+-\d+, appended\) stored at .*; not stored again\|/,
    );
  }, 120_000);

  it('lines: a line cut by the take is stored whole as a rejection; later lines carry on with their numbers', async () => {
    await startInput();
    const fd = await writer('cut.txt');
    await fd.write('CUT-1\nCUT-');
    await waitFor(() => exists(processed('cut.txt')), { what: 'taken early' });
    await fd.write('2\nCUT-3\n');
    await fd.close();
    await waitFor(() => sink.items.length === 4, { what: 'the part stored', timeoutMs: 30_000 });
    expect(sink.texts()).toEqual([
      'CUT-1@1',
      'CUT-@2',
      expect.stringMatching(
        /^<line 2 was still being written when the file was taken: its first 4 bytes were stored on their own .*\|CUT-2>$/,
      ),
      'CUT-3@3',
    ]);
  });

  it('ndjson: stores appended lines (CR line ends too)', async () => {
    await startInput({ format: 'ndjson' });
    const fd = await writer('r.ndjson');
    await fd.write('{"code":"N-1"}\r');
    await waitFor(() => exists(processed('r.ndjson')), { what: 'taken early' });
    await fd.write('{"code":"N-2"}\r{"code":"N-3"}\r');
    await waitFor(() => sink.items.length === 3, { what: 'the part stored' });
    expect(sink.texts()).toEqual(['N-1@1', 'N-2@2', 'N-3@3']);
  });

  it('json: growth after the take is a rejection naming the file and bytes, and a warning', async () => {
    await startInput({ format: 'json' });
    const fd = await writer('a.json');
    await fd.write('[{"code":"J-1"}]');
    await waitFor(() => exists(processed('a.json')), { what: 'taken' });
    await fd.write('\n[{"code":"J-2"}]');
    await waitFor(() => sink.items.length === 2, { what: 'growth reported' });
    const [, rejection] = sink.items;
    expect(rejection?.kind === 'rejection' && rejection.rejection).toMatchObject({
      reason: expect.stringMatching(
        /^file grew by 17 bytes after it was taken \(a JSON array cannot be read in parts\): bytes 16-33 of processed\/2026-11-22\/a\.json were not stored; write files under a temporary name/,
      ),
      origin: { file: 'a.json', movedTo: `processed/${DAY}/a.json`, from: 16, to: 33 },
    });
    expect(rejection?.kind === 'rejection' && rejection.rejection.raw.toString()).toBe(
      '\n[{"code":"J-2"}]',
    );
    expect(warnings().some((m) => /file grew by 17 bytes/.test(m))).toBe(true);
  });

  it('stop(): complete appended lines are stored, an incomplete last line is a rejection', async () => {
    const input = await startInput();
    const fd = await writer('s.txt');
    await fd.write('S-1\n');
    await waitFor(() => exists(processed('s.txt')), { what: 'taken' });
    await fd.write('S-2\nS-');
    await input.stop();
    expect(sink.texts()).toEqual([
      'S-1@1',
      'S-2@2',
      expect.stringMatching(
        /^<file grew after it was taken and the gateway stopped before its last line was complete: bytes 8-10 of processed\/2026-11-22\/s\.txt were not stored.*\|S->$/,
      ),
    ]);
    expect(await readFile(processed('s.txt'), 'utf8')).toBe('S-1\nS-2\nS-');
  });

  it('stops watching a file that did not change for the watch time', async () => {
    const input = await startInput();
    const fd = await writer('done.txt');
    await fd.write('D-1\n');
    await fd.close();
    await waitFor(() => exists(processed('done.txt')));
    // Its watch ends at the first check after the watch time, whenever a busy machine runs it.
    await waitFor(() => input.watchedForGrowth === 0, {
      what: 'the watch ended',
      timeoutMs: GROWTH_WATCH_MS + 30_000,
    });
    const moved = await open(processed('done.txt'), 'a');
    await moved.write('D-2\n');
    await moved.close();
    await sleep(STABLE_MS * 3);
    expect(sink.texts()).toEqual(['D-1@1']);
  });
});
