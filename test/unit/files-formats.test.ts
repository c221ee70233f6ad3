import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isGatewayError } from '../../src/errors.js';
import type { FileParseContext } from '../../src/inputs/files/file-format.js';
import { parseCsvFile, type CsvFormat } from '../../src/inputs/files/parse-csv.js';
import { parseJsonFile, parseNdjsonFile } from '../../src/inputs/files/parse-json.js';
import { parseLinesFile } from '../../src/inputs/files/parse-lines.js';
import { DEFAULT_JSON_FIELDS } from '../../src/inputs/json-read.js';
import type { IntakeItem } from '../../src/inputs/types.js';

/** QA findings 5 to 8 on the file formats: UTF-16 everywhere, CR-only lines, CSV quoting, delimiter hint. */

const receivedAt = new Date('2026-11-18T06:00:00Z');
const ctx = (fileName: string): FileParseContext => ({ inputId: 'drop-1', fileName, receivedAt });
const csv: CsvFormat = { barcodeColumn: 'barcode', timeColumn: 'read_at', delimiter: ',' };

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sg-files-formats-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(name: string, content: string | Buffer): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, typeof content === 'string' ? Buffer.from(content, 'latin1') : content);
  return path;
}

function summary(items: IntakeItem[]): unknown[] {
  return items.map((item) =>
    item.kind === 'read'
      ? { read: item.read.raw.toString('latin1'), line: item.read.origin?.['line'], ...(item.read.sourceTime ? { time: item.read.sourceTime } : {}) }
      : { rejected: item.rejection.raw.toString('latin1'), line: item.rejection.origin?.['line'], reason: item.rejection.reason },
  );
}

async function formatError(promise: Promise<unknown>): Promise<Error> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isGatewayError(err, 'SCANGW_E_INPUT'), `expected a SCANGW_E_INPUT error, got ${String(err)}`).toBe(true);
  return err as Error;
}

const utf16le = (text: string): Buffer => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
const utf16be = (text: string): Buffer => Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(text, 'utf16le').swap16()]);

describe('UTF-16 files (every format)', () => {
  it('fails lines, ndjson, json and csv files that are UTF-16 (with or without a byte order mark)', async () => {
    const message = /^file is UTF-16 encoded; export it as UTF-8/;
    const lines = await file('u16.txt', utf16le('A1\r\nA2\r\n'));
    expect((await formatError(parseLinesFile(lines, ctx('u16.txt')))).message).toMatch(message);
    const be = await file('u16be.txt', utf16be('A1\nA2\n'));
    expect((await formatError(parseLinesFile(be, ctx('u16be.txt')))).message).toMatch(message);
    const noBom = await file('u16nobom.txt', Buffer.from('ABC1\r\nABC2\r\n', 'utf16le'));
    expect((await formatError(parseLinesFile(noBom, ctx('u16nobom.txt')))).message).toMatch(message);
    const nd = await file('u16.ndjson', utf16le('{"code":"A"}\n'));
    expect((await formatError(parseNdjsonFile(nd, ctx('u16.ndjson'), DEFAULT_JSON_FIELDS))).message).toMatch(message);
    const js = await file('u16.json', utf16le('[{"code":"A"}]'));
    expect((await formatError(parseJsonFile(js, ctx('u16.json'), DEFAULT_JSON_FIELDS))).message).toMatch(message);
    const c = await file('u16.csv', utf16le('barcode\r\nA\r\n'));
    expect((await formatError(parseCsvFile(c, ctx('u16.csv'), { barcodeColumn: 'barcode', delimiter: ',' }))).message).toMatch(message);
  });

  it('still takes a one-character UTF-8 line and bytes FF FE in the middle of a file', async () => {
    expect(summary(await parseLinesFile(await file('one.txt', 'A'), ctx('one.txt')))).toEqual([{ read: 'A', line: 1 }]);
    expect(summary(await parseLinesFile(await file('mid.txt', 'A\n\xff\xfeB\n'), ctx('mid.txt')))).toEqual([
      { read: 'A', line: 1 },
      { read: '\xff\xfeB', line: 2 },
    ]);
  });
});

describe('line ends CR, LF and CRLF (lines and ndjson)', () => {
  it('splits a lines file with CR-only line ends, and mixed ends, into one read per line', async () => {
    const path = await file('mac.txt', 'CR-1\rCR-2\r\rCR-4\r\nCR-5\nCR-6');
    expect(summary(await parseLinesFile(path, ctx('mac.txt')))).toEqual([
      { read: 'CR-1', line: 1 },
      { read: 'CR-2', line: 2 },
      { read: 'CR-4', line: 4 },
      { read: 'CR-5', line: 5 },
      { read: 'CR-6', line: 6 },
    ]);
  });

  it('keeps a CRLF split across two read chunks as one line break', async () => {
    const first = 'A'.repeat(64 * 1024 - 1);
    const path = await file('split.txt', `${first}\r\nB\rC\n`);
    expect(summary(await parseLinesFile(path, { ...ctx('split.txt'), maxReadLength: 70_000 })).map((s) => (s as { line: number }).line)).toEqual([1, 2, 3]);
  });

  it('splits an ndjson file with CR-only line ends', async () => {
    const path = await file('mac.ndjson', '{"code":"N-1"}\r{"code":"N-2"}\r');
    expect(summary(await parseNdjsonFile(path, ctx('mac.ndjson'), DEFAULT_JSON_FIELDS))).toEqual([
      { read: 'N-1', line: 1 },
      { read: 'N-2', line: 2 },
    ]);
  });
});

describe('CSV quoting and column count', () => {
  it('rejects a row with broken quoting, with its line number, and delivers the other rows', async () => {
    const path = await file('ragged.csv', 'read_at,barcode\n2026-11-22T03:00:00,OK-1\n2026-11-22T03:00:00,"RAG"GED-5"\n2026-11-22T03:00:00,"OK-2"\n2026-11-22T03:00:00,"X" \n2026-11-22T03:00:00,OK-3\n');
    expect(summary(await parseCsvFile(path, ctx('ragged.csv'), csv))).toEqual([
      { read: 'OK-1', line: 2, time: '2026-11-22T03:00:00' },
      { rejected: '2026-11-22T03:00:00,"RAG"GED-5"', line: 3, reason: expect.stringMatching(/^broken quoting in column 2 \("barcode"\): a quote inside a quoted field must be doubled/) },
      { read: 'OK-2', line: 4, time: '2026-11-22T03:00:00' },
      { rejected: '2026-11-22T03:00:00,"X" ', line: 5, reason: expect.stringMatching(/^broken quoting/) },
      { read: 'OK-3', line: 6, time: '2026-11-22T03:00:00' },
    ]);
  });

  it('keeps doubled quotes, quoted delimiters and quoted line breaks; a quote inside an unquoted field is data', async () => {
    const path = await file('q.csv', 'barcode,note\n"A""1","x,y"\nB"2,"two\nlines"\n"C3"\n');
    expect(summary(await parseCsvFile(path, ctx('q.csv'), { barcodeColumn: 'barcode', delimiter: ',' }))).toEqual([
      { read: 'A"1', line: 2 },
      { read: 'B"2', line: 3 },
      { read: 'C3', line: 5 },
    ]);
  });

  it('still fails the whole file on a quote that is never closed (the rest of the file would be one field)', async () => {
    const path = await file('open.csv', 'read_at,barcode\nT1,"unterminated\nT2,B\n');
    expect((await formatError(parseCsvFile(path, ctx('open.csv'), csv))).message).toMatch(/CSV cannot be parsed: Quote Not Closed: .*line 2/);
  });

  it('rejects a row with more filled columns than the header; extra empty columns (trailing delimiters) are fine', async () => {
    const path = await file('wide.csv', 'read_at,barcode\nT1,A1\nT2,A,2\nT3,A3,,\n');
    expect(summary(await parseCsvFile(path, ctx('wide.csv'), csv))).toEqual([
      { read: 'A1', line: 2, time: 'T1' },
      { rejected: 'T2,A,2', line: 3, reason: 'row has 3 columns, the header 2: a value holding the delimiter "," must be quoted' },
      { read: 'A3', line: 4, time: 'T3' },
    ]);
  });
});

describe('CSV delimiter hint', () => {
  it('says the file looks semicolon- or tab-separated when the header is one column holding ";" or a tab', async () => {
    const semi = await file('semi.csv', 'read_at;barcode\n2026-11-22T03:00:00;A\n');
    expect((await formatError(parseCsvFile(semi, ctx('semi.csv'), csv))).message).toBe(
      'CSV header has no column "read_at" (timeColumn); header columns: "read_at;barcode" (the file looks semicolon-separated: set delimiter: ";")'.replace(
        '"read_at" (timeColumn)',
        '"barcode" (barcodeColumn)',
      ),
    );
    const tab = await file('tab.csv', 'barcode\tread_at\nA\tT\n');
    expect((await formatError(parseCsvFile(tab, ctx('tab.csv'), csv))).message).toMatch(/\(the file looks tab-separated: set delimiter: "\\t"\)$/);
    const comma = await file('comma.csv', 'read_at,barcode\nT,A\n');
    expect((await formatError(parseCsvFile(comma, ctx('comma.csv'), { ...csv, delimiter: ';' }))).message).toMatch(/\(the file looks comma-separated: set delimiter: ","\)$/);
  });
});
