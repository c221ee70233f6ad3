import type { JsonFieldsConfig } from '../schema-parts.js';
import { describeIssues, scanSchema } from '@scan-gateway/contract';
import { jsonRead, jsonReadProblem } from '../json-read.js';
import type { IntakeItem } from '../types.js';
import {
  checkEncoding,
  chunkerFor,
  fileFormatError,
  isBlank,
  maxReadLengthOf,
  readItem,
  rejectionItem,
  REJECTION_RAW_BYTES,
  withSource,
  type FileParseContext,
  type FileSource,
  type ItemsOut,
} from './file-format.js';
import { scanLines, type ByteRange } from './parse-lines.js';

/** Longest line of an ndjson file, in bytes: a JSON read with many attributes, never a megabyte. */
export const MAX_NDJSON_LINE_BYTES = 1024 * 1024;

/**
 * Largest `json` file taken, in bytes: one array is parsed in memory as a whole (JSON.parse has no
 * streaming form), so this bounds what it costs (about 10 times the file in heap); its reads are
 * then committed in chunks like any file's. Larger exports: ndjson, streamed at any size.
 */
export const MAX_JSON_FILE_BYTES = 8 * 1024 * 1024;

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
export async function parseNdjsonFile(
  source: FileSource,
  ctx: FileParseContext,
  fields: JsonFieldsConfig,
  range: ByteRange = {},
  out?: ItemsOut,
): Promise<IntakeItem[]> {
  return withSource(source, async (handle) => {
    const bom = await checkEncoding(handle, ctx.fileName);
    const { chunker, collected } = chunkerFor(out);
    await scanLines(
      handle,
      MAX_NDJSON_LINE_BYTES,
      {
        line: (bytes, line) => {
          if (isBlank(bytes)) return;
          let value: unknown;
          try {
            value = JSON.parse(utf8.decode(bytes));
          } catch (err) {
            const reason =
              err instanceof SyntaxError
                ? `line is not JSON: ${err.message}`
                : 'line is not valid UTF-8';
            chunker.push(
              rejectionItem(ctx, Buffer.from(bytes.subarray(0, REJECTION_RAW_BYTES)), line, reason),
            );
            return;
          }
          chunker.push(jsonItem(ctx, value, bytes, line, fields));
        },
        overlong: (head, line) =>
          chunker.push(
            rejectionItem(ctx, head, line, `line longer than ${MAX_NDJSON_LINE_BYTES} bytes`),
          ),
      },
      { ...range, start: Math.max(range.start ?? 0, bom) },
      () => chunker.drain(),
    );
    await chunker.end();
    return collected;
  });
}

/**
 * Reads a `json` file: one JSON array of reads (same objects as ndjson), or of ready Scans in the
 * upstream format (contract §2.5), validated; the two may be mixed. An element that is not a
 * valid read becomes a rejection whose `origin.line` is its position in the array, from 1.
 *
 * @throws GatewayError `SCANGW_E_INPUT` when the file is UTF-16, not UTF-8 JSON, not an array, or larger
 *   than {@link MAX_JSON_FILE_BYTES} (the whole file goes to `failed/`).
 */
export async function parseJsonFile(
  source: FileSource,
  ctx: FileParseContext,
  fields: JsonFieldsConfig,
  out?: ItemsOut,
): Promise<IntakeItem[]> {
  return withSource(source, async (handle) => {
    const { size } = await handle.stat();
    if (size > MAX_JSON_FILE_BYTES) {
      throw fileFormatError(
        ctx.fileName,
        `JSON file of ${size} bytes is larger than ${MAX_JSON_FILE_BYTES} (a JSON array is read whole); write large exports as ndjson`,
      );
    }
    const bom = await checkEncoding(handle, ctx.fileName);
    const whole = Buffer.alloc(size);
    const { bytesRead } = await handle.read(whole, 0, size, 0);
    const bytes = whole.subarray(bom, bytesRead);
    let value: unknown;
    try {
      value = JSON.parse(utf8.decode(bytes));
    } catch (err) {
      throw fileFormatError(
        ctx.fileName,
        err instanceof SyntaxError ? `file is not JSON: ${err.message}` : 'file is not valid UTF-8',
        err,
      );
    }
    if (!Array.isArray(value))
      throw fileFormatError(
        ctx.fileName,
        'JSON file must hold an array of reads, e.g. [{"code": "…"}]',
      );
    const array: unknown[] = value;
    const { chunker, collected } = chunkerFor(out);
    for (let i = 0; i < array.length; i++) {
      chunker.push(jsonItem(ctx, array[i], undefined, i + 1, fields));
      // Each element is dropped once made into an item, so the array's memory goes as chunks go.
      array[i] = undefined;
      if ((i + 1) % 1000 === 0) await chunker.drain();
    }
    await chunker.end();
    return collected;
  });
}

/**
 * An element shaped like a Scan of the upstream format (contract §2.5: it has `reference` and
 * `dcpKey`) is taken as a ready Scan, validated field by field, not as a read.
 */
function isScanShaped(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    'reference' in value &&
    'dcpKey' in value
  );
}

/** A ready Scan's fields, and nothing else (contract §2.5); made once, not per element. */
const strictScanSchema = scanSchema.strict();

function readyScanItem(
  ctx: FileParseContext,
  value: Record<string, unknown>,
  line: number,
): IntakeItem {
  const json = JSON.stringify(value);
  const checked = strictScanSchema.safeParse(value);
  if (!checked.success) {
    return rejectionItem(
      ctx,
      Buffer.from(json, 'utf8').subarray(0, REJECTION_RAW_BYTES),
      line,
      `not a valid Scan: ${describeIssues(checked.error)}`,
    );
  }
  const item = readItem(ctx, Buffer.from(json, 'utf8'), line);
  if (item.kind === 'read')
    item.read = {
      ...item.read,
      readyScan: checked.data,
      origin: { ...item.read.origin, format: 'scan' },
    };
  return item;
}

function jsonItem(
  ctx: FileParseContext,
  value: unknown,
  source: Buffer | undefined,
  line: number,
  fields: JsonFieldsConfig,
): IntakeItem {
  if (isScanShaped(value)) return readyScanItem(ctx, value, line);
  const raw = (): Buffer =>
    Buffer.from(
      (source ?? Buffer.from(JSON.stringify(value) ?? '', 'utf8')).subarray(0, REJECTION_RAW_BYTES),
    );
  const result = jsonRead(value, fields);
  if (!result.ok) return rejectionItem(ctx, raw(), line, jsonReadProblem(result));
  const { code, sourceTime, ...extras } = result.fields;
  const bytes = Buffer.from(code, 'utf8');
  const max = maxReadLengthOf(ctx);
  if (bytes.length > max)
    return rejectionItem(
      ctx,
      Buffer.from(bytes.subarray(0, REJECTION_RAW_BYTES)),
      line,
      `code longer than ${max} bytes`,
    );
  return readItem(
    ctx,
    bytes,
    line,
    sourceTime,
    Object.keys(extras).length > 0 ? extras : undefined,
  );
}
