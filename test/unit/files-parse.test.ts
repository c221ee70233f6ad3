import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isGatewayError } from '../../src/errors.js';
import { open } from 'node:fs/promises';
import {
  MAX_FILE_READ_BYTES,
  readBlocks,
  type FileParseContext,
} from '../../src/inputs/files/file-format.js';
import { parseCsvFile, type CsvFormat } from '../../src/inputs/files/parse-csv.js';
import { parseJsonFile, parseNdjsonFile } from '../../src/inputs/files/parse-json.js';
import { parseLinesFile } from '../../src/inputs/files/parse-lines.js';
import { DEFAULT_JSON_FIELDS } from '../../src/inputs/json-read.js';
import type { IntakeItem } from '../../src/inputs/types.js';
import { samplePath } from '../helpers/samples.js';

const SAMPLE_CSV = samplePath('goods-in-export.csv');
const GS = '\x1d';
const receivedAt = new Date('2026-11-18T06:00:00Z');
const ctx = (fileName: string): FileParseContext => ({ inputId: 'drop-1', fileName, receivedAt });
const csvFormat: CsvFormat = { barcodeColumn: 'barcode', timeColumn: 'read_at', delimiter: ',' };

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sg-files-parse-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(name: string, content: string | Buffer): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, typeof content === 'string' ? Buffer.from(content, 'latin1') : content);
  return path;
}

/** Items as plain facts: kind, raw as latin1 text (every byte visible), line, and the rest. */
function summary(items: IntakeItem[]): unknown[] {
  return items.map((item) =>
    item.kind === 'read'
      ? {
          read: item.read.raw.toString('latin1'),
          line: item.read.origin?.['line'],
          ...(item.read.sourceTime ? { time: item.read.sourceTime } : {}),
        }
      : {
          rejected: item.rejection.raw.toString('latin1'),
          line: item.rejection.origin?.['line'],
          reason: item.rejection.reason,
        },
  );
}

async function formatError(promise: Promise<unknown>): Promise<Error> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(
    isGatewayError(err, 'SCANGW_E_INPUT'),
    `expected a SCANGW_E_INPUT error, got ${String(err)}`,
  ).toBe(true);
  return err as Error;
}

describe('parseCsvFile', () => {
  it('reads the goods-in sample: 5 reads, exact bytes (GS, AIM id, quoted field), times and lines', async () => {
    const items = await parseCsvFile(SAMPLE_CSV, ctx('goods-in-export.csv'), csvFormat);
    expect(summary(items)).toEqual([
      { read: ']C100095212345678901235400PO-4711', line: 2, time: '2026-11-18T06:58:12+01:00' },
      {
        read: `]d2010952123454321310B2611-03${GS}21C2611030001234`,
        line: 3,
        time: '2026-11-18T06:58:40+01:00',
      },
      {
        read: `]d2010952123454321310B2611-03${GS}21C2611030001235`,
        line: 4,
        time: '2026-11-18T06:58:41+01:00',
      },
      { read: ']d1C24A0K3B0712345', line: 5, time: '2026-11-18T06:59:03+01:00' },
      { read: `]d20109521234543214${GS}10LOT`, line: 6, time: '2026-11-18T06:59:30+01:00' },
    ]);
    const first = items[0];
    expect(first?.kind === 'read' && first.read).toMatchObject({
      inputId: 'drop-1',
      receivedAt,
      origin: { file: 'goods-in-export.csv', line: 2 },
    });
  });

  it('handles a UTF-8 BOM, CRLF, blank lines, a quoted field spanning lines and counts lines correctly', async () => {
    const path = await file(
      'x.csv',
      Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from('\r\nbarcode,note\r\n\r\nA1,"two\r\nlines"\r\n\r\n\r\nB2,x\r\nC3', 'latin1'),
      ]),
    );
    expect(
      summary(await parseCsvFile(path, ctx('x.csv'), { barcodeColumn: 'barcode', delimiter: ',' })),
    ).toEqual([
      { read: 'A1', line: 4 },
      { read: 'B2', line: 8 },
      { read: 'C3', line: 9 },
    ]);
  });

  it('splits rows of a file mixing LF, CRLF and CR line ends', async () => {
    const path = await file('mixed.csv', 'barcode\nA\r\nB\rC\n');
    expect(
      summary(
        await parseCsvFile(path, ctx('mixed.csv'), { barcodeColumn: 'barcode', delimiter: ',' }),
      ),
    ).toEqual([
      { read: 'A', line: 2 },
      { read: 'B', line: 3 },
      { read: 'C', line: 4 },
    ]);
  });

  it('uses the configured delimiter and keeps bytes that are not valid UTF-8', async () => {
    const path = await file(
      'semi.csv',
      'zeit;barcode;note\n2026-01-01T00:00:00;AB\xff\x80;x\n;"Q;1"\n',
    );
    expect(
      summary(
        await parseCsvFile(path, ctx('semi.csv'), {
          barcodeColumn: 'barcode',
          timeColumn: 'zeit',
          delimiter: ';',
        }),
      ),
    ).toEqual([
      { read: 'AB\xff\x80', line: 2, time: '2026-01-01T00:00:00' },
      { read: 'Q;1', line: 3 },
    ]);
  });

  it('rejects a row without a barcode value (empty or missing field), with file and line, and skips empty rows', async () => {
    const path = await file(
      'gaps.csv',
      'read_at,barcode,station\nT1,,GI-01\nT2\n,,\nT3,  ,GI-02\nT4,OK,GI-01\n',
    );
    const items = await parseCsvFile(path, ctx('gaps.csv'), csvFormat);
    expect(summary(items)).toEqual([
      { rejected: 'T1,,GI-01', line: 2, reason: 'row has no value in column "barcode"' },
      { rejected: 'T2', line: 3, reason: 'row has no value in column "barcode"' },
      { rejected: 'T3,  ,GI-02', line: 5, reason: 'row has no value in column "barcode"' },
      { read: 'OK', line: 6, time: 'T4' },
    ]);
    const rejection = items[0];
    expect(rejection?.kind === 'rejection' && rejection.rejection.origin).toEqual({
      file: 'gaps.csv',
      line: 2,
    });
  });

  it('keeps a quote inside an unquoted barcode as data', async () => {
    const path = await file('q.csv', 'barcode\nAB"C\n');
    expect(
      summary(await parseCsvFile(path, ctx('q.csv'), { barcodeColumn: 'barcode', delimiter: ',' })),
    ).toEqual([{ read: 'AB"C', line: 2 }]);
  });

  it('fails the whole file when the header lacks the barcode column, naming the columns found', async () => {
    const path = await file('nobc.csv', 'read_at,code\nT1,ABC\n');
    const err = await formatError(parseCsvFile(path, ctx('nobc.csv'), csvFormat));
    expect(err.message).toBe(
      'CSV header has no column "barcode" (barcodeColumn); header columns: "read_at", "code"',
    );
  });

  it('fails the whole file when a configured time column is missing', async () => {
    const path = await file('notime.csv', 'barcode\nABC\n');
    const err = await formatError(parseCsvFile(path, ctx('notime.csv'), csvFormat));
    expect(err.message).toMatch(/no column "read_at" \(timeColumn\)/);
  });

  it('fails the whole file on an empty file, broken quoting, UTF-16 and oversized records', async () => {
    const empty = await file('empty.csv', '');
    expect((await formatError(parseCsvFile(empty, ctx('empty.csv'), csvFormat))).message).toMatch(
      /empty/,
    );
    const broken = await file('broken.csv', 'read_at,barcode\nT1,"unterminated\nT2,B\n');
    expect((await formatError(parseCsvFile(broken, ctx('broken.csv'), csvFormat))).message).toMatch(
      /CSV cannot be parsed: Quote Not Closed/,
    );
    const utf16 = await file(
      'u16.csv',
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('barcode\r\nA\r\n', 'utf16le')]),
    );
    expect((await formatError(parseCsvFile(utf16, ctx('u16.csv'), csvFormat))).message).toMatch(
      /UTF-16/,
    );
    const huge = await file('huge.csv', `barcode\n"${'A'.repeat(1024 * 1024 + 10)}"\n`);
    expect(
      (
        await formatError(
          parseCsvFile(huge, ctx('huge.csv'), { barcodeColumn: 'barcode', delimiter: ',' }),
        )
      ).message,
    ).toMatch(/CSV cannot be parsed/);
  });

  it('gives a header-only file no items', async () => {
    const path = await file('header.csv', 'read_at,barcode\r\n');
    expect(await parseCsvFile(path, ctx('header.csv'), csvFormat)).toEqual([]);
  });

  it('throws the file system error for a missing file', async () => {
    await expect(
      parseCsvFile(join(dir, 'missing.csv'), ctx('missing.csv'), csvFormat),
    ).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('parseLinesFile', () => {
  it('reads one barcode per line with LF or CRLF, skips blank lines, keeps bytes and line numbers', async () => {
    const content = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from(
        `]d2010952123454321310B2611-03${GS}21C1\r\n\r\nNOREAD\n   \n\xff\xfe\x00x\r\n  padded \nlast`,
        'latin1',
      ),
    ]);
    const path = await file('scans.txt', content);
    const items = await parseLinesFile(path, ctx('scans.txt'));
    expect(summary(items)).toEqual([
      { read: `]d2010952123454321310B2611-03${GS}21C1`, line: 1 },
      { read: 'NOREAD', line: 3 },
      { read: '\xff\xfe\x00x', line: 5 },
      { read: '  padded ', line: 6 },
      { read: 'last', line: 7 },
    ]);
    expect(items[0]?.kind === 'read' && items[0].read.origin).toEqual({
      file: 'scans.txt',
      line: 1,
    });
  });

  it('gives an empty file no items', async () => {
    expect(await parseLinesFile(await file('empty.txt', ''), ctx('empty.txt'))).toEqual([]);
  });

  it('rejects an overlong line with its first 256 bytes and carries on with the next line', async () => {
    const long = 'X'.repeat(MAX_FILE_READ_BYTES + 1);
    const path = await file(
      'long.txt',
      `A\n${long}\r\nB\n${'Y'.repeat(MAX_FILE_READ_BYTES)}\r\n${'Z'.repeat(200_000)}`,
    );
    expect(summary(await parseLinesFile(path, ctx('long.txt')))).toEqual([
      { read: 'A', line: 1 },
      {
        rejected: 'X'.repeat(256),
        line: 2,
        reason: `line longer than ${MAX_FILE_READ_BYTES} bytes`,
      },
      { read: 'B', line: 3 },
      { read: 'Y'.repeat(MAX_FILE_READ_BYTES), line: 4 },
      {
        rejected: 'Z'.repeat(256),
        line: 5,
        reason: `line longer than ${MAX_FILE_READ_BYTES} bytes`,
      },
    ]);
  });

  it('reads a file larger than one read chunk with lines split across chunks', async () => {
    const lines = Array.from({ length: 20_000 }, (_, i) => `CODE-${i}-${'p'.repeat(i % 37)}`);
    const path = await file('big.txt', lines.join('\r\n') + '\r\n');
    const items = await parseLinesFile(path, ctx('big.txt'));
    expect(items.length).toBe(lines.length);
    expect(items.map((i) => (i.kind === 'read' ? i.read.raw.toString('latin1') : '?'))).toEqual(
      lines,
    );
    expect(items.at(-1)?.kind === 'read' && items.at(-1)).toMatchObject({
      read: { origin: { line: 20_000 } },
    });
    expect((await readFile(path)).length).toBeGreaterThan(128 * 1024);
  });
});

describe('parseCsvFile (DCP, parent and attribute columns)', () => {
  const format: CsvFormat = {
    barcodeColumn: 'barcode',
    delimiter: ',',
    dcpColumn: 'station',
    parentColumn: 'pallet',
    attributeColumns: { supplier: 'supplier', deliveryNote: 'delivery_note' },
  };

  it('takes the DCP, a parent and attributes from their columns, leaving blank cells out', async () => {
    const path = await file(
      'cols.csv',
      'barcode,station,pallet,supplier,delivery_note\nA1,GI-01,PAL-1,SUP-0042,"DN-1, partial"\nA2,,,SUP-0042,\n',
    );
    const items = await parseCsvFile(path, ctx('cols.csv'), format);
    expect(
      items.map((i) =>
        i.kind === 'read'
          ? { dcp: i.read.dcpKey, parents: i.read.parents, attributes: i.read.attributes }
          : '?',
      ),
    ).toEqual([
      {
        dcp: 'GI-01',
        parents: ['PAL-1'],
        attributes: { supplier: 'SUP-0042', deliveryNote: 'DN-1, partial' },
      },
      { dcp: undefined, parents: undefined, attributes: { supplier: 'SUP-0042' } },
    ]);
  });

  it('fails the whole file when a configured column is missing, naming the key', async () => {
    const path = await file('nocol.csv', 'barcode,station\nA1,GI-01\n');
    const err = await formatError(parseCsvFile(path, ctx('nocol.csv'), format));
    expect(err.message).toMatch(/no column "pallet" \(parentColumn\)/);
  });

  it("rejects a barcode longer than the context's maxReadLength", async () => {
    const path = await file('short.csv', 'barcode\nABCDEFGHIJ\nABC\n');
    expect(
      summary(await parseCsvFile(path, { ...ctx('short.csv'), maxReadLength: 5 }, csvFormat2)),
    ).toEqual([
      { rejected: 'ABCDEFGHIJ', line: 2, reason: 'barcode longer than 5 bytes' },
      { read: 'ABC', line: 3 },
    ]);
  });
});

const csvFormat2: CsvFormat = { barcodeColumn: 'barcode', delimiter: ',' };

describe('parseNdjsonFile', () => {
  it('reads one JSON read per line; bad lines become rejections with line number and reason; others are kept', async () => {
    const path = await file(
      'r.ndjson',
      Buffer.concat([
        Buffer.from(
          '{"code":"A","ts":"2026-11-18T07:00:00Z","dcp":"GI-02","parents":["P1","P2"],"attributes":{"n":1,"ok":false}}\n',
        ),
        Buffer.from('\n{"code": 1}\r\n[1,2]\n'),
        Buffer.from([0xff, 0xfe, 0x0a]),
        Buffer.from('{"code":"B","ts":7}\n{"code":"C"}'),
      ]),
    );
    const items = await parseNdjsonFile(path, ctx('r.ndjson'), DEFAULT_JSON_FIELDS);
    expect(summary(items)).toEqual([
      { read: 'A', line: 1, time: '2026-11-18T07:00:00Z' },
      { rejected: '{"code": 1}', line: 3, reason: 'field "code" must be text, got number 1' },
      { rejected: '[1,2]', line: 4, reason: 'expected a JSON object, got a list' },
      { rejected: '\xff\xfe', line: 5, reason: 'line is not valid UTF-8' },
      {
        rejected: '{"code":"B","ts":7}',
        line: 6,
        reason: 'field "ts" must be ISO 8601 text, got number 7',
      },
      { read: 'C', line: 7 },
    ]);
    expect(items[0]).toMatchObject({
      read: { dcpKey: 'GI-02', parents: ['P1', 'P2'], attributes: { n: '1', ok: 'false' } },
    });
  });
});

describe('parseJsonFile', () => {
  it('reads an array of reads (BOM allowed); an invalid element is a rejection at its position', async () => {
    const path = await file(
      'a.json',
      Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from('[{"code":"A"},{"code":""},{"code":"B","parents":"P"}]'),
      ]),
    );
    const items = await parseJsonFile(path, ctx('a.json'), DEFAULT_JSON_FIELDS);
    expect(summary(items)).toEqual([
      { read: 'A', line: 1 },
      { rejected: '{"code":""}', line: 2, reason: 'field "code" is empty' },
      { read: 'B', line: 3 },
    ]);
    expect(items[2]).toMatchObject({ read: { parents: ['P'] } });
  });

  it('takes ready Scans in the upstream format, validated field by field', async () => {
    const good = {
      reference: 'MOD-1',
      timeStamp: '2026-11-18T07:00:00',
      dcpKey: 'EOL-3',
      productModelKey: 'PACK-A',
      parents: [],
      attributes: [{ key: 'v', value: '3.6' }],
    };
    const bad = {
      reference: 'MOD-2',
      timeStamp: '2026-11-18T07:00:00',
      dcpKey: 'EOL-3',
      productModelKey: 'PACK-A',
      parents: [],
      attributes: [{ key: 'v', value: 3.6 }],
    };
    const path = await file('scans.json', JSON.stringify([good, bad, { code: 'C' }]));
    const items = await parseJsonFile(path, ctx('scans.json'), DEFAULT_JSON_FIELDS);
    expect(items[0]).toMatchObject({
      kind: 'read',
      read: { readyScan: good, origin: { file: 'scans.json', line: 1, format: 'scan' } },
    });
    expect(items[0]?.kind === 'read' && JSON.parse(items[0].read.raw.toString('utf8'))).toEqual(
      good,
    );
    expect(items[1]).toMatchObject({
      kind: 'rejection',
      rejection: { reason: expect.stringMatching(/not a valid Scan: .*attributes\[0\]\.value/) },
    });
    expect(items[2]).toMatchObject({ kind: 'read' });
    expect(items[2]?.kind === 'read' && items[2].read.readyScan).toBeUndefined();
  });

  it('fails the whole file when it is not JSON or not an array', async () => {
    expect(
      (
        await formatError(
          parseJsonFile(await file('b.json', '[{"code":'), ctx('b.json'), DEFAULT_JSON_FIELDS),
        )
      ).message,
    ).toMatch(/not JSON/);
    expect(
      (
        await formatError(
          parseJsonFile(await file('c.json', '{"code":"A"}'), ctx('c.json'), DEFAULT_JSON_FIELDS),
        )
      ).message,
    ).toMatch(/array of reads/);
  });
});

// The file formats' harder cases: UTF-16 in every format, CR-only lines, CSV quoting, delimiter hint.
const csv = csvFormat;
const utf16le = (text: string): Buffer =>
  Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
const utf16be = (text: string): Buffer =>
  Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(text, 'utf16le').swap16()]);

describe('UTF-16 files (every format)', () => {
  it('fails lines, ndjson, json and csv files that are UTF-16 (with or without a byte order mark)', async () => {
    const message = /^file is UTF-16 encoded; export it as UTF-8/;
    const lines = await file('u16.txt', utf16le('A1\r\nA2\r\n'));
    expect((await formatError(parseLinesFile(lines, ctx('u16.txt')))).message).toMatch(message);
    const be = await file('u16be.txt', utf16be('A1\nA2\n'));
    expect((await formatError(parseLinesFile(be, ctx('u16be.txt')))).message).toMatch(message);
    const noBom = await file('u16nobom.txt', Buffer.from('ABC1\r\nABC2\r\n', 'utf16le'));
    expect((await formatError(parseLinesFile(noBom, ctx('u16nobom.txt')))).message).toMatch(
      message,
    );
    const nd = await file('u16.ndjson', utf16le('{"code":"A"}\n'));
    expect(
      (await formatError(parseNdjsonFile(nd, ctx('u16.ndjson'), DEFAULT_JSON_FIELDS))).message,
    ).toMatch(message);
    const js = await file('u16.json', utf16le('[{"code":"A"}]'));
    expect(
      (await formatError(parseJsonFile(js, ctx('u16.json'), DEFAULT_JSON_FIELDS))).message,
    ).toMatch(message);
    const c = await file('u16.csv', utf16le('barcode\r\nA\r\n'));
    expect(
      (
        await formatError(
          parseCsvFile(c, ctx('u16.csv'), { barcodeColumn: 'barcode', delimiter: ',' }),
        )
      ).message,
    ).toMatch(message);
  });

  it('still takes a one-character UTF-8 line and bytes FF FE in the middle of a file', async () => {
    expect(summary(await parseLinesFile(await file('one.txt', 'A'), ctx('one.txt')))).toEqual([
      { read: 'A', line: 1 },
    ]);
    expect(
      summary(await parseLinesFile(await file('mid.txt', 'A\n\xff\xfeB\n'), ctx('mid.txt'))),
    ).toEqual([
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
    expect(
      summary(await parseLinesFile(path, { ...ctx('split.txt'), maxReadLength: 70_000 })).map(
        (s) => (s as { line: number }).line,
      ),
    ).toEqual([1, 2, 3]);
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
    const path = await file(
      'ragged.csv',
      'read_at,barcode\n2026-11-22T03:00:00,OK-1\n2026-11-22T03:00:00,"RAG"GED-5"\n2026-11-22T03:00:00,"OK-2"\n2026-11-22T03:00:00,"X" \n2026-11-22T03:00:00,OK-3\n',
    );
    expect(summary(await parseCsvFile(path, ctx('ragged.csv'), csv))).toEqual([
      { read: 'OK-1', line: 2, time: '2026-11-22T03:00:00' },
      {
        rejected: '2026-11-22T03:00:00,"RAG"GED-5"',
        line: 3,
        reason: expect.stringMatching(
          /^broken quoting in column 2 \("barcode"\): a quote inside a quoted field must be doubled/,
        ),
      },
      { read: 'OK-2', line: 4, time: '2026-11-22T03:00:00' },
      {
        rejected: '2026-11-22T03:00:00,"X" ',
        line: 5,
        reason: expect.stringMatching(/^broken quoting/),
      },
      { read: 'OK-3', line: 6, time: '2026-11-22T03:00:00' },
    ]);
  });

  it('keeps doubled quotes, quoted delimiters and quoted line breaks; a quote inside an unquoted field is data', async () => {
    const path = await file('q.csv', 'barcode,note\n"A""1","x,y"\nB"2,"two\nlines"\n"C3"\n');
    expect(
      summary(await parseCsvFile(path, ctx('q.csv'), { barcodeColumn: 'barcode', delimiter: ',' })),
    ).toEqual([
      { read: 'A"1', line: 2 },
      { read: 'B"2', line: 3 },
      { read: 'C3', line: 5 },
    ]);
  });

  it('still fails the whole file on a quote that is never closed (the rest of the file would be one field)', async () => {
    const path = await file('open.csv', 'read_at,barcode\nT1,"unterminated\nT2,B\n');
    expect((await formatError(parseCsvFile(path, ctx('open.csv'), csv))).message).toMatch(
      /CSV cannot be parsed: Quote Not Closed: .*line 2/,
    );
  });

  it('rejects a row with more filled columns than the header; extra empty columns (trailing delimiters) are fine', async () => {
    const path = await file('wide.csv', 'read_at,barcode\nT1,A1\nT2,A,2\nT3,A3,,\n');
    expect(summary(await parseCsvFile(path, ctx('wide.csv'), csv))).toEqual([
      { read: 'A1', line: 2, time: 'T1' },
      {
        rejected: 'T2,A,2',
        line: 3,
        reason: 'row has 3 columns, the header 2: a value holding the delimiter "," must be quoted',
      },
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
    expect((await formatError(parseCsvFile(tab, ctx('tab.csv'), csv))).message).toMatch(
      /\(the file looks tab-separated: set delimiter: "\\t"\)$/,
    );
    const comma = await file('comma.csv', 'read_at,barcode\nT,A\n');
    expect(
      (await formatError(parseCsvFile(comma, ctx('comma.csv'), { ...csv, delimiter: ';' })))
        .message,
    ).toMatch(/\(the file looks comma-separated: set delimiter: ","\)$/);
  });
});

describe('readBlocks', () => {
  it('reads a range in blocks, fresh or through one shared buffer, never past the range or the file', async () => {
    const path = join(dir, 'blocks.txt');
    await writeFile(path, 'abcdefghij');
    const handle = await open(path, 'r');
    try {
      for (const reuse of [false, true]) {
        const seen: string[] = [];
        for await (const block of readBlocks(handle, 0, Infinity, 4, reuse))
          seen.push(block.toString());
        expect(seen).toEqual(['abcd', 'efgh', 'ij']);
        const ranged: string[] = [];
        for await (const block of readBlocks(handle, 1, 7, 4, reuse)) ranged.push(block.toString());
        expect(ranged).toEqual(['bcde', 'fg']);
      }
    } finally {
      await handle.close();
    }
  });
});
