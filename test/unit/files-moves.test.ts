import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  freePath,
  localDateFolder,
  moveToFailed,
  moveToProcessed,
} from '../../src/inputs/files/file-moves.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sg-files-moves-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('localDateFolder', () => {
  it('formats the local calendar date with zero padding', () => {
    expect(localDateFolder(new Date(2026, 0, 5, 23, 59))).toBe('2026-01-05');
    expect(localDateFolder(new Date(2026, 10, 18, 0, 0))).toBe('2026-11-18');
  });
});

describe('freePath', () => {
  it('keeps the name when free and adds -1, -2 before the extension when taken', async () => {
    expect(await freePath(dir, 'a.csv')).toBe(join(dir, 'a.csv'));
    await writeFile(join(dir, 'a.csv'), '');
    expect(await freePath(dir, 'a.csv')).toBe(join(dir, 'a-1.csv'));
    await writeFile(join(dir, 'a-1.csv'), '');
    expect(await freePath(dir, 'a.csv')).toBe(join(dir, 'a-2.csv'));
    await writeFile(join(dir, 'noext'), '');
    expect(await freePath(dir, 'noext')).toBe(join(dir, 'noext-1'));
  });
});

describe('moveToProcessed', () => {
  it('moves into processed/<local date>/ and never overwrites an earlier file of the same name', async () => {
    const at = new Date(2026, 10, 18, 7, 0);
    await writeFile(join(dir, 'x.csv'), 'first');
    expect(await moveToProcessed(join(dir, 'x.csv'), dir, at)).toBe(
      join(dir, 'processed', '2026-11-18', 'x.csv'),
    );
    await writeFile(join(dir, 'x.csv'), 'second');
    expect(await moveToProcessed(join(dir, 'x.csv'), dir, at)).toBe(
      join(dir, 'processed', '2026-11-18', 'x-1.csv'),
    );
    expect(await readFile(join(dir, 'processed', '2026-11-18', 'x.csv'), 'utf8')).toBe('first');
    expect(await readFile(join(dir, 'processed', '2026-11-18', 'x-1.csv'), 'utf8')).toBe('second');
    expect(await readdir(dir)).toEqual(['processed']);
  });
});

describe('moveToFailed', () => {
  it('moves into failed/ and writes <name>.error.txt with the reason beside it', async () => {
    await mkdir(join(dir, 'failed'));
    await writeFile(join(dir, 'bad.csv'), 'a,b\n');
    const target = await moveToFailed(
      join(dir, 'bad.csv'),
      dir,
      'CSV header has no column "barcode"',
      {
        inputId: 'drop-1',
        at: new Date('2026-11-18T06:00:00Z'),
      },
    );
    expect(target).toBe(join(dir, 'failed', 'bad.csv'));
    expect((await readdir(join(dir, 'failed'))).sort()).toEqual(['bad.csv', 'bad.csv.error.txt']);
    const text = await readFile(join(dir, 'failed', 'bad.csv.error.txt'), 'utf8');
    expect(text).toContain('reason: CSV header has no column "barcode"');
    expect(text).toContain('input:  drop-1');
    expect(text).toContain('time:   2026-11-18T06:00:00.000Z');
  });
});
