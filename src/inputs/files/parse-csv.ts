import type { FileHandle } from 'node:fs/promises';
import type { IntakeItem } from '../types.js';
import { CsvSyntaxError, CsvTokenizer } from './csv-records.js';
import {
  checkEncoding,
  chunkerFor,
  fileFormatError,
  isBlank,
  maxReadLengthOf,
  readBlocks,
  readItem,
  rejectionItem,
  REJECTION_RAW_BYTES,
  withSource,
  type FileParseContext,
  type FileSource,
  type ItemsOut,
  type ReadExtras,
} from './file-format.js';
import type { ByteRange } from './parse-lines.js';

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
  /** The header's names, for messages. */
  names: string[];
}

/** Largest CSV record accepted, in bytes; a file with a longer one (or binary junk) fails whole. */
export const MAX_CSV_RECORD_BYTES = 1024 * 1024;

/**
 * Reads a `csv` file: a header row, then one row per barcode (RFC 4180 quoting, CRLF, LF or CR, a
 * UTF-8 BOM allowed). Each row becomes a read of the barcode column's bytes, exactly as in the file
 * (GS bytes and AIM identifiers kept, quotes of a quoted field removed), with `sourceTime` from
 * `timeColumn`, the DCP, a parent and attributes from their columns where configured and filled,
 * and `origin { file, line }` where `line` is the row's first line in the file.
 *
 * Rows holding only empty fields are skipped. These rows become a rejection with their line, the
 * rows around them are taken: a row without a barcode value (`raw` = the row's fields joined by the
 * delimiter); a row with broken quoting (a quoted field whose closing quote is not followed by the
 * delimiter or the line end, as `"RAG"GED-5"`; `raw` = the row's text); a row with more filled
 * columns than the header (an unquoted value holding the delimiter). A quote inside an unquoted
 * field is data. The file is parsed as a stream (latin1, which maps every byte to one character,
 * so bytes survive unchanged even when they are not valid UTF-8); with `out`, memory holds one chunk of items, not the
 * text.
 *
 * With `range.start` after the header, only the rows from there (up to `range.end`) are read, with
 * the columns of the file's header: the part a writer appended after the file was taken.
 *
 * @throws GatewayError `SCANGW_E_INPUT` (see {@link fileFormatError}) when the file cannot be taken
 *   at all: empty, UTF-16, no header column `barcodeColumn` (or another configured column), a quote
 *   that is never closed, or a record over {@link MAX_CSV_RECORD_BYTES}.
 * @throws the file system error when the file cannot be read.
 */
export async function parseCsvFile(
  source: FileSource,
  ctx: FileParseContext,
  format: CsvFormat,
  range: ByteRange = {},
  out?: ItemsOut,
): Promise<IntakeItem[]> {
  return withSource(source, (handle) => parseCsv(handle, ctx, format, range, out));
}

/**
 * Reads a `csv` file as {@link parseCsvFile} does, and throws what it would throw, but makes no
 * item: the pass that finds a file unreadable as a whole before any of its rows is committed.
 * Its garbage is the tokenizer's fields only, which die young; items built and dropped
 * in chunks would outlive V8's young generation and grow the old one for nothing.
 *
 * @throws as {@link parseCsvFile}.
 */
export async function checkCsvFile(
  source: FileSource,
  ctx: FileParseContext,
  format: CsvFormat,
  range: ByteRange = {},
): Promise<void> {
  await withSource(source, (handle) => parseCsv(handle, ctx, format, range, undefined, true));
}

async function parseCsv(
  handle: FileHandle,
  ctx: FileParseContext,
  format: CsvFormat,
  range: ByteRange,
  out: ItemsOut | undefined,
  checkOnly = false,
): Promise<IntakeItem[]> {
  const bom = await checkEncoding(handle, ctx.fileName);
  const delimiter = Buffer.from(format.delimiter, 'utf8').toString('latin1');
  const shownDelimiter = JSON.stringify(format.delimiter);
  const { chunker, collected } = chunkerFor(out);
  const max = maxReadLengthOf(ctx);
  const start = Math.max(range.start ?? 0, bom);
  let columns: Columns | undefined;
  if (start > bom) {
    const header = await readHeader(handle, bom, delimiter, ctx.fileName);
    if (!header) throw fileFormatError(ctx.fileName, 'CSV file is empty: expected a header row');
    columns = findColumns(header, format, ctx.fileName);
  }

  const tokenizer = new CsvTokenizer(
    delimiter,
    {
      record: (record, line) => {
        if (record.every((field) => isBlank(field))) return;
        if (!columns) {
          columns = findColumns(record, format, ctx.fileName);
          return;
        }
        if (checkOnly) return;
        const width = columns.names.length;
        if (record.length > width && record.slice(width).some((field) => !isBlank(field))) {
          const row = Buffer.from(record.join(delimiter), 'latin1').subarray(0, max);
          const reason = `row has ${record.length} columns, the header ${width}: a value holding the delimiter ${shownDelimiter} must be quoted`;
          chunker.push(rejectionItem(ctx, Buffer.from(row), line, reason));
          return;
        }
        const barcode = record[columns.barcode];
        if (barcode === undefined || isBlank(barcode)) {
          const row = Buffer.from(record.join(delimiter), 'latin1').subarray(0, max);
          chunker.push(
            rejectionItem(
              ctx,
              Buffer.from(row),
              line,
              `row has no value in column "${format.barcodeColumn}"`,
            ),
          );
          return;
        }
        const bytes = Buffer.from(barcode, 'latin1');
        if (bytes.length > max) {
          chunker.push(
            rejectionItem(
              ctx,
              Buffer.from(bytes.subarray(0, REJECTION_RAW_BYTES)),
              line,
              `barcode longer than ${max} bytes`,
            ),
          );
          return;
        }
        const sourceTime = cell(record, columns.time);
        chunker.push(readItem(ctx, bytes, line, sourceTime, extrasOf(record, columns)));
      },
      broken: (raw, line, problem) => {
        const name = columns?.names[problem.column - 1];
        const where =
          name === undefined
            ? `column ${problem.column}`
            : `column ${problem.column} (${JSON.stringify(name)})`;
        const reason =
          `broken quoting in ${where}: a quote inside a quoted field must be doubled ("") and the field must end at its ` +
          `closing quote, found ${JSON.stringify(problem.found)} after it`;
        if (!columns)
          throw fileFormatError(ctx.fileName, `CSV header row cannot be read: ${reason}`);
        if (checkOnly) return;
        chunker.push(
          rejectionItem(
            ctx,
            Buffer.from(Buffer.from(raw, 'latin1').subarray(0, max)),
            line,
            reason,
          ),
        );
      },
    },
    MAX_CSV_RECORD_BYTES,
    range.firstLine ?? 1,
  );

  try {
    await feed(handle, tokenizer, start, range.end, () => chunker.drain());
  } catch (err) {
    if (err instanceof CsvSyntaxError)
      throw fileFormatError(ctx.fileName, `CSV cannot be parsed: ${err.message}`, err);
    throw err;
  }
  if (!columns) throw fileFormatError(ctx.fileName, 'CSV file is empty: expected a header row');
  await chunker.end();
  return collected;
}

/**
 * Streams bytes `[start, end)` of a file through the tokenizer (blocks of 32 KiB, `afterBlock`
 * awaited after each: the caller hands on the rows made), then ends it.
 */
async function feed(
  handle: FileHandle,
  tokenizer: CsvTokenizer,
  start: number,
  end?: number,
  afterBlock?: () => Promise<void>,
): Promise<void> {
  if (end === undefined || end > start) {
    // 32 KiB: each block becomes one latin1 string, and V8 puts a string over 128 KiB straight
    // into its old generation (a large object, freed only by a full collection); a 256 KiB block
    // made every pass over a 90 MiB file 90 MiB of old-generation garbage.
    for await (const block of readBlocks(handle, start, end, 32 * 1024, true)) {
      // latin1 maps every byte to one character, so a block may end anywhere.
      tokenizer.push(block.toString('latin1'));
      if (afterBlock) await afterBlock();
    }
  }
  tokenizer.end();
}

/** Thrown inside the header read to stop it after the header row. */
const HEADER_FOUND = Symbol('header found');

/** The file's header row (its first record with a filled field), or undefined for an empty file. */
async function readHeader(
  handle: FileHandle,
  start: number,
  delimiter: string,
  fileName: string,
): Promise<string[] | undefined> {
  let header: string[] | undefined;
  const tokenizer = new CsvTokenizer(
    delimiter,
    {
      record: (record) => {
        if (record.every((field) => isBlank(field))) return;
        header = record;
        throw HEADER_FOUND;
      },
      broken: () => {
        throw fileFormatError(fileName, 'CSV header row cannot be read: broken quoting');
      },
    },
    MAX_CSV_RECORD_BYTES,
  );
  try {
    await feed(handle, tokenizer, start);
  } catch (err) {
    if (err === HEADER_FOUND) return header;
    if (err instanceof CsvSyntaxError)
      throw fileFormatError(fileName, `CSV cannot be parsed: ${err.message}`, err);
    throw err;
  }
  return header;
}

/** A cell as UTF-8 text, trimmed; undefined when there is no such column or the cell is blank. */
function cell(record: string[], index: number | undefined): string | undefined {
  const value = index === undefined ? undefined : record[index];
  if (value === undefined) return undefined;
  const text = latin1ToUtf8(value).trim();
  return text === '' ? undefined : text;
}

function extrasOf(record: string[], columns: Columns): ReadExtras | undefined {
  if (columns.dcp === undefined && columns.parent === undefined && columns.attributes.length === 0)
    return undefined;
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
    if (index < 0)
      throw fileFormatError(
        fileName,
        `CSV header has no column "${name}" (${key}); header columns: ${shown}${delimiterHint(names, format.delimiter)}`,
      );
    return index;
  };
  const optional = (name: string | undefined, key: string): number | undefined =>
    name === undefined ? undefined : find(name, key);
  return {
    barcode: find(format.barcodeColumn, 'barcodeColumn'),
    time: optional(format.timeColumn, 'timeColumn'),
    dcp: optional(format.dcpColumn, 'dcpColumn'),
    parent: optional(format.parentColumn, 'parentColumn'),
    attributes: Object.entries(format.attributeColumns ?? {}).map(([key, name]) => [
      key,
      find(name, `attributeColumns.${key}`),
    ]),
    names,
  };
}

const OTHER_DELIMITERS: [delimiter: string, name: string][] = [
  [';', 'semicolon'],
  ['\t', 'tab'],
  [',', 'comma'],
  ['|', 'pipe'],
];

/** A header read as one column that holds another common delimiter: say which to configure. */
function delimiterHint(names: string[], configured: string): string {
  const only = names.length === 1 ? names[0] : undefined;
  if (only === undefined) return '';
  for (const [delimiter, name] of OTHER_DELIMITERS) {
    if (delimiter !== configured && only.includes(delimiter)) {
      return ` (the file looks ${name}-separated: set delimiter: ${JSON.stringify(delimiter)})`;
    }
  }
  return '';
}

function latin1ToUtf8(text: string): string {
  return Buffer.from(text, 'latin1').toString('utf8');
}
