import { readFile, stat } from 'node:fs/promises';
import type { JsonFieldsConfig } from '../../config/input-schemas.js';
import { describeIssues, scanSchema } from '../../upstream/contract.js';
import { jsonRead, jsonReadProblem } from '../json-read.js';
import type { IntakeItem } from '../types.js';
import { checkEncoding, fileFormatError, isBlank, maxReadLengthOf, readItem, rejectionItem, REJECTION_RAW_BYTES, type FileParseContext } from './file-format.js';
import { scanLines, type ByteRange } from './parse-lines.js';

/** Longest line of an ndjson file, in bytes: a JSON read with many attributes, never a megabyte. */
export const MAX_NDJSON_LINE_BYTES = 1024 * 1024;

/** Largest `json` file taken, in bytes: the whole array is parsed in memory. Larger: use ndjson. */
export const MAX_JSON_FILE_BYTES = 64 * 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads an `ndjson` file: one JSON read per line (`{"code": …, "ts": …, "dcp": …, "parents": …,
 * "attributes": …}`, field paths from `fields`), blank lines skipped. A line that is not UTF-8,
 * not JSON, or not a valid read becomes a rejection with its line number and reason; the lines
 * around it are taken. Lines end at LF, CRLF or CR.
 *
 * @throws GatewayError `SCANGW_E_INPUT` when the file is UTF-16 (the whole file goes to `failed/`).
 * @throws the file system error when the file cannot be read.
 */
export async function parseNdjsonFile(path: string, ctx: FileParseContext, fields: JsonFieldsConfig, range: ByteRange = {}): Promise<IntakeItem[]> {
  const bom = await checkEncoding(path, ctx.fileName);
  const items: IntakeItem[] = [];
  await scanLines(path, MAX_NDJSON_LINE_BYTES, {
    line: (bytes, line) => {
      if (isBlank(bytes)) return;
      let value: unknown;
      try {
        value = JSON.parse(utf8.decode(bytes));
      } catch (err) {
        const reason = err instanceof SyntaxError ? `line is not JSON: ${err.message}` : 'line is not valid UTF-8';
        items.push(rejectionItem(ctx, Buffer.from(bytes.subarray(0, REJECTION_RAW_BYTES)), line, reason));
        return;
      }
      items.push(jsonItem(ctx, value, bytes, line, fields));
    },
    overlong: (head, line) => items.push(rejectionItem(ctx, head, line, `line longer than ${MAX_NDJSON_LINE_BYTES} bytes`)),
  }, { ...range, start: Math.max(range.start ?? 0, bom) });
  return items;
}

/**
 * Reads a `json` file: one JSON array of reads (same objects as ndjson), or of ready Scans in the
 * upstream format (contract §2.5), validated; the two may be mixed. An element that is not a
 * valid read becomes a rejection whose `origin.line` is its position in the array, from 1.
 *
 * @throws GatewayError `SCANGW_E_INPUT` when the file is UTF-16, not UTF-8 JSON, not an array, or larger
 *   than {@link MAX_JSON_FILE_BYTES} (the whole file goes to `failed/`).
 */
export async function parseJsonFile(path: string, ctx: FileParseContext, fields: JsonFieldsConfig): Promise<IntakeItem[]> {
  const { size } = await stat(path);
  if (size > MAX_JSON_FILE_BYTES) {
    throw fileFormatError(ctx.fileName, `JSON file of ${size} bytes is larger than ${MAX_JSON_FILE_BYTES}; write large exports as ndjson`);
  }
  const bom = await checkEncoding(path, ctx.fileName);
  const bytes = (await readFile(path)).subarray(bom);
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(bytes));
  } catch (err) {
    throw fileFormatError(ctx.fileName, err instanceof SyntaxError ? `file is not JSON: ${err.message}` : 'file is not valid UTF-8', err);
  }
  if (!Array.isArray(value)) throw fileFormatError(ctx.fileName, 'JSON file must hold an array of reads, e.g. [{"code": "…"}]');
  return value.map((element, i) => jsonItem(ctx, element, undefined, i + 1, fields));
}

/**
 * An element shaped like a Scan of the upstream format (contract §2.5: it has `reference` and
 * `dcpKey`) is taken as a ready Scan, validated field by field, not as a read.
 */
function isScanShaped(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && 'reference' in value && 'dcpKey' in value;
}

function readyScanItem(ctx: FileParseContext, value: Record<string, unknown>, line: number): IntakeItem {
  const json = JSON.stringify(value);
  const checked = scanSchema.strict().safeParse(value);
  if (!checked.success) {
    return rejectionItem(ctx, Buffer.from(json, 'utf8').subarray(0, REJECTION_RAW_BYTES), line, `not a valid Scan: ${describeIssues(checked.error)}`);
  }
  const item = readItem(ctx, Buffer.from(json, 'utf8'), line);
  if (item.kind === 'read') item.read = { ...item.read, readyScan: checked.data, origin: { ...item.read.origin, format: 'scan' } };
  return item;
}

function jsonItem(ctx: FileParseContext, value: unknown, source: Buffer | undefined, line: number, fields: JsonFieldsConfig): IntakeItem {
  if (isScanShaped(value)) return readyScanItem(ctx, value, line);
  const raw = (): Buffer => Buffer.from((source ?? Buffer.from(JSON.stringify(value) ?? '', 'utf8')).subarray(0, REJECTION_RAW_BYTES));
  const result = jsonRead(value, fields);
  if (!result.ok) return rejectionItem(ctx, raw(), line, jsonReadProblem(result));
  const { code, sourceTime, ...extras } = result.fields;
  const bytes = Buffer.from(code, 'utf8');
  const max = maxReadLengthOf(ctx);
  if (bytes.length > max) return rejectionItem(ctx, Buffer.from(bytes.subarray(0, REJECTION_RAW_BYTES)), line, `code longer than ${max} bytes`);
  return readItem(ctx, bytes, line, sourceTime, Object.keys(extras).length > 0 ? extras : undefined);
}
