import type { FileHandle } from 'node:fs/promises';
import type { FilesInputConfig } from './schema.js';
import type { IntakeItem } from '../types.js';
import type { FileParseContext, ItemsOut } from './file-format.js';
import type { ByteRange } from './parse-lines.js';
import { parseCsvFile, type CsvFormat } from './parse-csv.js';
import { parseJsonFile, parseNdjsonFile } from './parse-json.js';
import { parseLinesFile } from './parse-lines.js';

/** The CSV keys of a `csv` files input. */
export function csvFormatOf(c: FilesInputConfig): CsvFormat {
  return {
    barcodeColumn: c.barcodeColumn,
    timeColumn: c.timeColumn,
    delimiter: c.delimiter,
    dcpColumn: c.dcpColumn,
    parentColumn: c.parentColumn,
    attributeColumns: c.attributeColumns,
  };
}

/**
 * Parses bytes `range` of an open inbox file in the input's `format`: to `out` in chunks of
 * `FILE_CHUNK_ROWS` (file-format.ts) items, or (without `out`) all items returned. Throws a `GatewayError`
 * (`SCANGW_E_INPUT`) when the file cannot be parsed as a whole, or what reading it throws.
 */
export function parseInboxFile(
  config: FilesInputConfig,
  handle: FileHandle,
  ctx: FileParseContext,
  range: ByteRange = {},
  out?: ItemsOut,
): Promise<IntakeItem[]> {
  const c = config;
  switch (c.format) {
    case 'csv':
      return parseCsvFile(handle, ctx, csvFormatOf(c), range, out);
    case 'ndjson':
      return parseNdjsonFile(handle, ctx, c.fields, range, out);
    case 'json':
      return parseJsonFile(handle, ctx, c.fields, out);
    case 'lines':
      return parseLinesFile(handle, ctx, range, out);
  }
}
