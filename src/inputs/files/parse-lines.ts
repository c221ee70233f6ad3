import type { FileHandle } from 'node:fs/promises';
import type { IntakeItem } from '../types.js';
import {
  checkEncoding,
  chunkerFor,
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
} from './file-format.js';

const LF = 0x0a;
const CR = 0x0d;

/** What {@link scanLines} hands over for each line. */
export interface LineSink {
  /** A line of at most `maxLineBytes`, line break removed; may be blank. */
  line(bytes: Buffer, line: number): void;
  /** A line longer than `maxLineBytes`: its first {@link REJECTION_RAW_BYTES} bytes. */
  overlong(head: Buffer, line: number): void;
}

/**
 * A part of a file to read: bytes `start` (default 0) up to `end` (exclusive; default the end of
 * the file), whose first line is line `firstLine` (default 1) of the file. Used for the part a
 * writer appended after the file was taken.
 */
export interface ByteRange {
  start?: number;
  end?: number;
  firstLine?: number;
}

/**
 * Streams a file line by line, numbering lines from 1 (blank lines counted). A line ends at LF,
 * CRLF or a lone CR (old Mac exports, some scanner tools), as in CSV. Memory holds at most one line
 * of `maxLineBytes`, never the whole text.
 *
 * `afterBlock` is awaited after each block read (64 KiB): where the caller hands on what the
 * block's lines made, holding the read while it waits.
 *
 * @throws the file system error when the file cannot be read (EIO…).
 */
export async function scanLines(
  handle: FileHandle,
  maxLineBytes: number,
  sink: LineSink,
  range: ByteRange = {},
  afterBlock?: () => Promise<void>,
): Promise<void> {
  const start = range.start ?? 0;
  if (range.end !== undefined && range.end <= start) return;
  let parts: Buffer[] = [];
  let partsLength = 0;
  let overlongHead: Buffer | undefined;
  let line = range.firstLine ?? 1;
  /** The previous chunk ended with a CR: an LF at the start of this one belongs to it. */
  let afterCr = false;

  const append = (segment: Buffer): void => {
    if (segment.length === 0 || overlongHead) return;
    if (partsLength + segment.length > maxLineBytes) {
      overlongHead = Buffer.concat([...parts, segment.subarray(0, REJECTION_RAW_BYTES)]).subarray(
        0,
        REJECTION_RAW_BYTES,
      );
      parts = [];
      partsLength = 0;
      return;
    }
    parts.push(segment);
    partsLength += segment.length;
  };

  const endLine = (): void => {
    if (overlongHead) sink.overlong(Buffer.from(overlongHead), line);
    // Own copy: a slice would otherwise keep the whole 64 KiB read chunk alive.
    else sink.line(Buffer.from(Buffer.concat(parts, partsLength)), line);
    parts = [];
    partsLength = 0;
    overlongHead = undefined;
    line += 1;
  };

  for await (const chunk of readBlocks(handle, start, range.end)) {
    let from = 0;
    if (afterCr && chunk[0] === LF) from = 1;
    afterCr = false;
    for (let i = from; i < chunk.length; i++) {
      const byte = chunk[i];
      if (byte !== LF && byte !== CR) continue;
      append(chunk.subarray(from, i));
      endLine();
      if (byte === CR) {
        if (i + 1 < chunk.length) {
          if (chunk[i + 1] === LF) i += 1;
        } else {
          afterCr = true;
        }
      }
      from = i + 1;
    }
    append(chunk.subarray(from));
    if (afterBlock) await afterBlock();
  }
  if (partsLength > 0 || overlongHead) endLine();
}

/**
 * Reads a `lines` file: one barcode per line (LF, CRLF or CR), as one read per non-blank line
 * with `origin { file, line }`. Bytes are kept exactly, only the line break (and a UTF-8 BOM
 * before the first line) removed. A line longer than `maxReadLength` becomes a rejection holding
 * its first bytes.
 *
 * With `out`, the items go there in chunks as the file is read (and the answer is empty);
 * without, they are all returned.
 *
 * @throws GatewayError `SCANGW_E_INPUT` when the file is UTF-16 (the whole file goes to `failed/`).
 * @throws the file system error when the file cannot be read (ENOENT, EACCES, EIO…).
 */
export async function parseLinesFile(
  source: FileSource,
  ctx: FileParseContext,
  range: ByteRange = {},
  out?: ItemsOut,
): Promise<IntakeItem[]> {
  return withSource(source, async (handle) => {
    const bom = await checkEncoding(handle, ctx.fileName);
    const { chunker, collected } = chunkerFor(out);
    const max = maxReadLengthOf(ctx);
    await scanLines(
      handle,
      max,
      {
        line: (bytes, line) => {
          if (!isBlank(bytes)) chunker.push(readItem(ctx, bytes, line));
        },
        overlong: (head, line) =>
          chunker.push(rejectionItem(ctx, head, line, `line longer than ${max} bytes`)),
      },
      { ...range, start: Math.max(range.start ?? 0, bom) },
      () => chunker.drain(),
    );
    await chunker.end();
    return collected;
  });
}

/**
 * Counts the line breaks (LF, CRLF, CR) in bytes `[0, end)` of a file: the number of the line
 * starting at `end`, minus one. Also tells where the last line starts and whether `end` follows a
 * line break.
 */
export async function lineBreaksBefore(
  handle: FileHandle,
  end: number,
): Promise<{ breaks: number; lastLineStart: number; endsWithBreak: boolean }> {
  let breaks = 0;
  let lastLineStart = 0;
  let previous = -1;
  let offset = 0;
  if (end <= 0) return { breaks, lastLineStart, endsWithBreak: true };
  for await (const chunk of readBlocks(handle, 0, end)) {
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i] as number;
      if (byte === LF) {
        if (previous !== CR) breaks += 1;
        lastLineStart = offset + i + 1;
      } else if (byte === CR) {
        breaks += 1;
        lastLineStart = offset + i + 1;
      }
      previous = byte;
    }
    offset += chunk.length;
  }
  return { breaks, lastLineStart, endsWithBreak: previous === LF || previous === CR };
}
