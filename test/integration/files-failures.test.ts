import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { filesInputSchema, type FilesInputConfig } from '../../src/inputs/files/schema.js';
import { FilesInput } from '../../src/inputs/files/files-input.js';
import type { FileChunk, FileRecord, FileSink } from '../../src/inputs/files/file-sink.js';
import type { InputRejection, IntakeItem } from '../../src/inputs/types.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The files input: what goes to failed/, a re-dropped file, symlinks
 * and sub-folders must leave a counted, inspectable trace (an input-level rejection) or a warning.
 */

const NOW = new Date(2026, 10, 18, 7, 0, 0);
const DAY = '2026-11-18';
const STABLE_MS = 200;

/** What a submit came with: the file or the file's chunk (none for a plain submit). */
type Receipt = { file?: FileRecord; chunk?: FileChunk };

/** Records every submit with its file or chunk, like the intake would receive them. */
class RecordingSink implements FileSink {
  readonly commits: ({ items: IntakeItem[] } & Receipt)[] = [];
  /** Every submit, plain or with its file or chunk, comes here. */
  async take(items: IntakeItem[], receipt: Receipt = {}): Promise<void> {
    this.commits.push({ items, ...receipt });
  }
  submit(items: IntakeItem[]): Promise<void> {
    return this.take(items);
  }
  submitFile(items: IntakeItem[], file: FileRecord): Promise<void> {
    return this.take(items, { file });
  }
  submitChunk(items: IntakeItem[], chunk: FileChunk): Promise<void> {
    return this.take(items, { chunk });
  }
  fileProgress(): undefined {
    return undefined;
  }
  get rejections(): InputRejection[] {
    return this.commits.flatMap((c) =>
      c.items.flatMap((i) => (i.kind === 'rejection' ? [i.rejection] : [])),
    );
  }
  get reads(): string[] {
    return this.commits.flatMap((c) =>
      c.items.flatMap((i) => (i.kind === 'read' ? [i.read.raw.toString('latin1')] : [])),
    );
  }
}

let root: string;
let dir: string;
let sink: RecordingSink;
let logLines: string[];
const inputs: FilesInput[] = [];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sg-files-failures-'));
  dir = join(root, 'drop');
  sink = new RecordingSink();
  logLines = [];
});

afterEach(async () => {
  for (const input of inputs.splice(0)) await input.stop();
  await rm(root, { recursive: true, force: true });
});

async function startInput(overrides: Partial<FilesInputConfig> = {}): Promise<FilesInput> {
  const log = memoryLogger('debug');
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
    retryBaseMs: 100,
    retryMaxMs: 400,
    folderCheckMs: 100,
  });
  inputs.push(input);
  await input.start();
  return input;
}

const warnings = (): { msg: string; [key: string]: unknown }[] =>
  logLines
    .map((l) => JSON.parse(l) as { level: number; msg: string })
    .filter((l) => l.level === 40);

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, STABLE_MS * 4));

describe('files moved to failed/ are counted (an input-level rejection each)', () => {
  const cases: {
    name: string;
    format: FilesInputConfig['format'];
    content: Buffer;
    reason: RegExp;
  }[] = [
    { name: 'empty.csv', format: 'csv', content: Buffer.alloc(0), reason: /^CSV file is empty/ },
    {
      name: 'u16.csv',
      format: 'csv',
      content: Buffer.concat([
        Buffer.from([0xff, 0xfe]),
        Buffer.from('barcode\r\nA\r\n', 'utf16le'),
      ]),
      reason: /UTF-16/,
    },
    {
      name: 'wrong.csv',
      format: 'csv',
      content: Buffer.from('read_at,code\nT,A\n'),
      reason: /^CSV header has no column "barcode"/,
    },
    {
      name: 'semi.csv',
      format: 'csv',
      content: Buffer.from('read_at;barcode\nT;A\n'),
      reason: /semicolon-separated: set delimiter: ";"/,
    },
    {
      name: 'object.json',
      format: 'json',
      content: Buffer.from('{"code":"J"}'),
      reason: /must hold an array of reads/,
    },
  ];
  for (const c of cases) {
    it(`${c.name}: rejection with the first bytes, the .error.txt reason and where it went`, async () => {
      await startInput({ format: c.format });
      await writeFile(join(dir, c.name), c.content);
      await waitFor(() => exists(join(dir, 'failed', `${c.name}.error.txt`)), {
        what: `${c.name} in failed/`,
      });
      await waitFor(() => sink.rejections.length === 1, { what: 'one rejection submitted' });
      const [rejection] = sink.rejections;
      const errorText = await readFile(join(dir, 'failed', `${c.name}.error.txt`), 'utf8');
      expect(rejection?.reason).toMatch(c.reason);
      expect(errorText).toContain(`reason: ${rejection?.reason}`);
      expect(rejection?.raw).toEqual(c.content.subarray(0, 4096));
      expect(rejection?.origin).toMatchObject({ file: c.name, movedTo: `failed/${c.name}` });
      expect(rejection?.inputId).toBe('drop-1');
      expect(sink.reads).toEqual([]);
    });
  }

  it('a symbolic link loop is not followed: both links go to failed/ unread, counted, named as links', async () => {
    await mkdir(dir, { recursive: true });
    await symlink(join(dir, 'loop-b.txt'), join(dir, 'loop-a.txt'));
    await symlink(join(dir, 'loop-a.txt'), join(dir, 'loop-b.txt'));
    await startInput();
    await waitFor(() => sink.rejections.length === 2, { what: 'both links counted' });
    expect(sink.rejections.map((r) => r.reason).sort()).toEqual([
      expect.stringMatching(/^a symbolic link to .*loop-a\.txt, not a regular file/),
      expect.stringMatching(/^a symbolic link to .*loop-b\.txt, not a regular file/),
    ]);
    expect(sink.rejections.every((r) => r.raw.length === 0)).toBe(true);
    expect(inputs[0]?.status().state).toBe('up');
    expect(sink.rejections.map((r) => r.origin?.['movedTo']).sort()).toEqual([
      'failed/loop-a.txt',
      'failed/loop-b.txt',
    ]);
    await waitFor(() => exists(join(dir, 'failed', 'loop-b.txt.error.txt')));
  });

  it('when the buffer refuses the rejection, the file stays in the folder and is tried again', async () => {
    let refuse = 2;
    const inner = sink;
    sink = Object.assign(Object.create(RecordingSink.prototype) as RecordingSink, inner, {
      take: async (items: IntakeItem[], receipt: Receipt = {}) => {
        if (refuse-- > 0) throw new Error('SQLITE_FULL');
        inner.commits.push({ items, ...receipt });
      },
    });
    await startInput({ format: 'csv' });
    sink = inner;
    await writeFile(join(dir, 'wrong.csv'), 'code\nA\n');
    await waitFor(() => exists(join(dir, 'failed', 'wrong.csv.error.txt')), {
      what: 'moved after the retries',
    });
    expect(inner.rejections).toHaveLength(1);
  });
});

describe('a file with content already stored', () => {
  it('is moved to processed/ and counted as a rejection naming the earlier file and time', async () => {
    await startInput();
    await writeFile(join(dir, 'first.txt'), 'DUP-1\n');
    await waitFor(() => exists(join(dir, 'processed', DAY, 'first.txt')));
    await writeFile(join(dir, 'again.txt'), 'DUP-1\n');
    await waitFor(() => exists(join(dir, 'processed', DAY, 'again.txt')));
    await waitFor(() => sink.rejections.length === 1);
    expect(sink.reads).toEqual(['DUP-1']);
    const [rejection] = sink.rejections;
    expect(rejection?.reason).toBe(
      `same content as first.txt stored at ${NOW.toISOString()}; not stored again`,
    );
    expect(rejection?.origin).toMatchObject({
      file: 'again.txt',
      movedTo: `processed/${DAY}/again.txt`,
    });
    expect(rejection?.raw.toString()).toBe('DUP-1\n');
    // Not submitted with the file hash: the intake would take it for the earlier file and drop it.
    expect(sink.commits[1]?.file ?? sink.commits[1]?.chunk).toBeUndefined();
  });
});

describe('symbolic links (never followed)', () => {
  it('a link present at start, one made while running and a dangling one all go to failed/ unread, as links', async () => {
    await mkdir(dir, { recursive: true });
    const outside = join(root, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'target-1.txt'), 'LINK-1\n');
    await writeFile(join(outside, 'target-2.txt'), 'LINK-2\n');
    await symlink(join(outside, 'target-1.txt'), join(dir, 'at-start.txt'));
    await symlink(join(outside, 'missing.txt'), join(dir, 'dangling.txt'));
    await startInput();
    await symlink(join(outside, 'target-2.txt'), join(dir, 'while-running.txt'));
    await writeFile(join(dir, 'plain.txt'), 'PLAIN-1\n');
    await waitFor(() => sink.rejections.length === 3, { what: 'three links counted' });
    await waitFor(() => sink.reads.length === 1, { what: 'the plain file read' });
    expect(sink.reads).toEqual(['PLAIN-1']);
    const byFile = Object.fromEntries(sink.rejections.map((r) => [r.origin?.['file'], r]));
    expect(byFile['at-start.txt']?.reason).toMatch(
      /^a symbolic link to .*target-1\.txt, not a regular file/,
    );
    expect(byFile['while-running.txt']?.reason).toMatch(
      /^a symbolic link to .*target-2\.txt, not a regular file/,
    );
    expect(byFile['dangling.txt']?.reason).toMatch(
      /^a symbolic link to .*missing\.txt, not a regular file/,
    );
    expect(byFile['dangling.txt']?.origin).toMatchObject({
      file: 'dangling.txt',
      movedTo: 'failed/dangling.txt',
    });
    expect(sink.rejections.every((r) => r.raw.length === 0)).toBe(true);
    await waitFor(() => exists(join(dir, 'failed', 'while-running.txt.error.txt')));
    expect(input_running()).toBe(true);
  });
});

function input_running(): boolean {
  return inputs.every((i) => i.status().state === 'up');
}

describe('sub-folders', () => {
  it('warns once per sub-folder (present at start or made later) that it is not read, and keeps ignoring it', async () => {
    await mkdir(join(dir, 'old-exports'), { recursive: true });
    await writeFile(join(dir, 'old-exports', 'x.txt'), 'SUB-1\n');
    await startInput();
    await mkdir(join(dir, 'new-sub'));
    await writeFile(join(dir, 'new-sub', 'y.txt'), 'SUB-2\n');
    await writeFile(join(dir, 'top.txt'), 'TOP-1\n');
    await waitFor(() => exists(join(dir, 'processed', DAY, 'top.txt')));
    await waitFor(() => warnings().filter((w) => /sub-folder/.test(w.msg)).length === 2, {
      what: 'two sub-folder warnings',
    });
    await writeFile(join(dir, 'new-sub', 'z.txt'), 'SUB-3\n');
    await settle();
    const subWarnings = warnings().filter((w) => /sub-folder/.test(w.msg));
    expect(subWarnings.map((w) => w['folder']).sort()).toEqual(['new-sub', 'old-exports']);
    expect(subWarnings[0]?.msg).toMatch(/not read; drop files into the folder itself/);
    expect(sink.reads).toEqual(['TOP-1']);
    expect(await readdir(join(dir, 'new-sub'))).toEqual(['y.txt', 'z.txt']);
  });
});
