import { createReadStream } from 'node:fs';
import type { IntakeItem } from '../types.js';
import { isBlank, maxReadLengthOf, readItem, rejectionItem, REJECTION_RAW_BYTES, UTF8_BOM, type FileParseContext } from './file-format.js';

const LF = 0x0a;
const CR = 0x0d;

/** What {@link scanLines} hands over for each line. */
export interface LineSink {
  /** A line of at most `maxLineBytes`, line break (and a BOM before line 1) removed; may be blank. */
  line(bytes: Buffer, line: number): void;
  /** A line longer than `maxLineBytes`: its first {@link REJECTION_RAW_BYTES} bytes. */
  overlong(head: Buffer, line: number): void;
}

/**
 * Streams a file line by line, LF or CRLF, numbering lines from 1 (blank lines counted). Memory
 * holds at most one line of `maxLineBytes`, never the whole text.
 *
 * @throws the file system error when the file cannot be read (ENOENT, EACCES, EIO…).
 */
export async function scanLines(path: string, maxLineBytes: number, sink: LineSink): Promise<void> {
  let parts: Buffer[] = [];
  let partsLength = 0;
  let overlongHead: Buffer | undefined;
  let line = 1;

  const append = (segment: Buffer): void => {
    if (segment.length === 0 || overlongHead) return;
    // +1: a CR before the LF is part of the line break, not of the line.
    if (partsLength + segment.length > maxLineBytes + 1) {
      overlongHead = Buffer.concat([...parts, segment.subarray(0, REJECTION_RAW_BYTES)]).subarray(0, REJECTION_RAW_BYTES);
      parts = [];
      partsLength = 0;
      return;
    }
    parts.push(segment);
    partsLength += segment.length;
  };

  const endLine = (): void => {
    if (overlongHead) {
      sink.overlong(Buffer.from(overlongHead), line);
    } else {
      let bytes = Buffer.concat(parts, partsLength);
      if (bytes.length > 0 && bytes[bytes.length - 1] === CR) bytes = bytes.subarray(0, bytes.length - 1);
      if (line === 1 && bytes.subarray(0, UTF8_BOM.length).equals(UTF8_BOM)) bytes = bytes.subarray(UTF8_BOM.length);
      if (bytes.length > maxLineBytes) sink.overlong(Buffer.from(bytes.subarray(0, REJECTION_RAW_BYTES)), line);
      // Own copy: the slice would otherwise keep the whole 64 KiB read chunk alive.
      else sink.line(Buffer.from(bytes), line);
    }
    parts = [];
    partsLength = 0;
    overlongHead = undefined;
    line += 1;
  };

  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    let start = 0;
    for (let lf = chunk.indexOf(LF, start); lf >= 0; lf = chunk.indexOf(LF, start)) {
      append(chunk.subarray(start, lf));
      endLine();
      start = lf + 1;
    }
    append(chunk.subarray(start));
  }
  if (partsLength > 0 || overlongHead) endLine();
}

/**
 * Reads a `lines` file: one barcode per line, LF or CRLF, as one read per non-blank line with
 * `origin { file, line }`. Bytes are kept exactly, only the line break (and a UTF-8 BOM before the
 * first line) removed. A line longer than `maxReadLength` becomes a rejection holding its first bytes.
 *
 * @throws the file system error when the file cannot be read (ENOENT, EACCES, EIO…).
 */
export async function parseLinesFile(path: string, ctx: FileParseContext): Promise<IntakeItem[]> {
  const items: IntakeItem[] = [];
  const max = maxReadLengthOf(ctx);
  await scanLines(path, max, {
    line: (bytes, line) => {
      if (!isBlank(bytes)) items.push(readItem(ctx, bytes, line));
    },
    overlong: (head, line) => items.push(rejectionItem(ctx, head, line, `line longer than ${max} bytes`)),
  });
  return items;
}
