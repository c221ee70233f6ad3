import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { CsvError, parse } from 'csv-parse';
import type { IntakeItem } from '../types.js';
import {
  fileFormatError,
  isBlank,
  maxReadLengthOf,
  readItem,
  rejectionItem,
  REJECTION_RAW_BYTES,
  UTF8_BOM,
  type FileParseContext,
  type ReadExtras,
} from './file-format.js';

/** The CSV keys of a `files` input (`FilesInputConfig`). */
export interface CsvFormat {
  /** Header of the column holding the barcode. */
  barcodeColumn: string;
  /** Header of the column holding the source's time stamp, passed on unparsed as `sourceTime`. */
  timeColumn?: string | undefined;
  /** Field delimiter, one character. */
  delimiter: string;
  /** Header of the column holding the DCP key; a blank cell leaves the input's DCP. */
  dcpColumn?: string | undefined;
  /** Header of the column holding a parent reference; a blank cell means none. */
  parentColumn?: string | undefined;
  /** Attributes from columns: attribute key → header; a blank cell leaves the attribute out. */
  attributeColumns?: Record<string, string> | undefined;
}

interface Columns {
  barcode: number;
  time: number | undefined;
  dcp: number | undefined;
  parent: number | undefined;
  attributes: [key: string, index: number][];
}

/** Largest CSV record accepted, in bytes; a file with a longer one (or binary junk) fails whole. */
export const MAX_CSV_RECORD_BYTES = 1024 * 1024;

/**
 * Reads a `csv` file: a header row, then one row per barcode (RFC 4180 quoting, CRLF or LF, a
 * UTF-8 BOM allowed). Each row becomes a read of the barcode column's bytes, exactly as in the file
 * (GS bytes and AIM identifiers kept, quotes of a quoted field removed), with `sourceTime` from
 * `timeColumn`, the DCP, a parent and attributes from their columns where configured and filled,
 * and `origin { file, line }` where `line` is the row's first line in the file.
 *
 * Rows holding only empty fields are skipped; a row without a barcode value becomes a rejection
 * whose `raw` is the row's fields joined by the delimiter.
 * The file is parsed as a stream (latin1, which maps every byte to one character, so bytes survive
 * unchanged even when they are not valid UTF-8); memory holds the items, not the text.
 *
 * @throws GatewayError `SCANGW_E_INPUT` (see {@link fileFormatError}) when the file cannot be taken
 *   at all: empty, UTF-16, no header column `barcodeColumn` (or another configured column), broken
 *   quoting, or a record over {@link MAX_CSV_RECORD_BYTES}.
 * @throws the file system error when the file cannot be read.
 */
export async function parseCsvFile(path: string, ctx: FileParseContext, format: CsvFormat): Promise<IntakeItem[]> {
  const start = await byteOrderMarkLength(path, ctx.fileName);
  const delimiter = Buffer.from(format.delimiter, 'utf8').toString('latin1');
  const parser = parse({
    encoding: 'latin1',
    bom: false, // handled above: csv-parse would switch the encoding to utf8 on a BOM
    delimiter,
    // All three, CRLF first: a file whose first line ends differently from the rest still splits.
    record_delimiter: ['\r\n', '\n', '\r'],
    relax_column_count: true, // a short row is that row's problem (rejection), not the file's
    relax_quotes: true, // a `"` inside an unquoted barcode is data
    max_record_size: MAX_CSV_RECORD_BYTES,
    // No `info`/`raw`: they cost a third of the parse time on big files. Empty lines come through
    // as [''] and are skipped below, which keeps line counting in our hands.
  });

  const items: IntakeItem[] = [];
  const max = maxReadLengthOf(ctx);
  let columns: Columns | undefined;
  let line = 0;

  const source = createReadStream(path, { start, highWaterMark: 1024 * 1024 });
  source.on('error', (err) => parser.destroy(err));
  source.pipe(parser);
  try {
    // Iterated directly (not via pipeline) so an error thrown below, e.g. no barcode column,
    // reaches the caller as itself rather than as an AbortError.
    for await (const record of parser as AsyncIterable<string[]>) {
      const firstLine = line + 1;
      line = firstLine + record.reduce((n, field) => n + countLineFeeds(field), 0);
      if (record.every((field) => isBlank(field))) continue;

      if (!columns) {
        columns = findColumns(record, format, ctx.fileName);
        continue;
      }
      const barcode = record[columns.barcode];
      if (barcode === undefined || isBlank(barcode)) {
        const row = Buffer.from(record.join(delimiter), 'latin1').subarray(0, max);
        items.push(rejectionItem(ctx, Buffer.from(row), firstLine, `row has no value in column "${format.barcodeColumn}"`));
        continue;
      }
      const bytes = Buffer.from(barcode, 'latin1');
      if (bytes.length > max) {
        items.push(rejectionItem(ctx, Buffer.from(bytes.subarray(0, REJECTION_RAW_BYTES)), firstLine, `barcode longer than ${max} bytes`));
        continue;
      }
      const sourceTime = cell(record, columns.time);
      items.push(readItem(ctx, bytes, firstLine, sourceTime, extrasOf(record, columns)));
    }
  } catch (err) {
    if (err instanceof CsvError) throw fileFormatError(ctx.fileName, `CSV cannot be parsed: ${err.message}`, err);
    throw err;
  } finally {
    source.destroy();
  }
  if (!columns) throw fileFormatError(ctx.fileName, 'CSV file is empty: expected a header row');
  return items;
}

/** A cell as UTF-8 text, trimmed; undefined when there is no such column or the cell is blank. */
function cell(record: string[], index: number | undefined): string | undefined {
  const value = index === undefined ? undefined : record[index];
  if (value === undefined) return undefined;
  const text = latin1ToUtf8(value).trim();
  return text === '' ? undefined : text;
}

function extrasOf(record: string[], columns: Columns): ReadExtras | undefined {
  if (columns.dcp === undefined && columns.parent === undefined && columns.attributes.length === 0) return undefined;
  const extras: ReadExtras = {};
  const dcp = cell(record, columns.dcp);
  if (dcp !== undefined) extras.dcpKey = dcp;
  const parent = cell(record, columns.parent);
  if (parent !== undefined) extras.parents = [parent];
  const attributes: Record<string, string> = {};
  for (const [key, index] of columns.attributes) {
    const value = cell(record, index);
    if (value !== undefined) attributes[key] = value;
  }
  if (Object.keys(attributes).length > 0) extras.attributes = attributes;
  return extras;
}

function findColumns(header: string[], format: CsvFormat, fileName: string): Columns {
  const names = header.map((h) => latin1ToUtf8(h).trim());
  const shown = names.map((n) => JSON.stringify(n)).join(', ');
  const find = (name: string, key: string): number => {
    const index = names.indexOf(name);
    if (index < 0) throw fileFormatError(fileName, `CSV header has no column "${name}" (${key}); header columns: ${shown}`);
    return index;
  };
  const optional = (name: string | undefined, key: string): number | undefined => (name === undefined ? undefined : find(name, key));
  return {
    barcode: find(format.barcodeColumn, 'barcodeColumn'),
    time: optional(format.timeColumn, 'timeColumn'),
    dcp: optional(format.dcpColumn, 'dcpColumn'),
    parent: optional(format.parentColumn, 'parentColumn'),
    attributes: Object.entries(format.attributeColumns ?? {}).map(([key, name]) => [key, find(name, `attributeColumns.${key}`)]),
  };
}

/** Length of a UTF-8 BOM to skip (0 or 3). UTF-16 is refused: its bytes are not CSV text. */
async function byteOrderMarkLength(path: string, fileName: string): Promise<number> {
  const handle = await open(path, 'r');
  try {
    const head = Buffer.alloc(3);
    const { bytesRead } = await handle.read(head, 0, 3, 0);
    if (bytesRead === 3 && head.equals(UTF8_BOM)) return 3;
    if (bytesRead >= 2 && ((head[0] === 0xff && head[1] === 0xfe) || (head[0] === 0xfe && head[1] === 0xff))) {
      throw fileFormatError(fileName, 'CSV file is UTF-16 encoded; export it as UTF-8 (Excel: "CSV UTF-8")');
    }
    return 0;
  } finally {
    await handle.close();
  }
}

function latin1ToUtf8(text: string): string {
  return Buffer.from(text, 'latin1').toString('utf8');
}

function countLineFeeds(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n += 1;
  return n;
}
