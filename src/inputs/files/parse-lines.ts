import { createReadStream } from 'node:fs';
import type { IntakeItem } from '../types.js';
import {
  isBlank,
  MAX_FILE_READ_BYTES,
  readItem,
  rejectionItem,
  REJECTION_RAW_BYTES,
  UTF8_BOM,
  type FileParseContext,
} from './file-format.js';

const LF = 0x0a;
const CR = 0x0d;

/**
 * Reads a `lines` file: one barcode per line, LF or CRLF, as one read per non-blank line with
 * `origin { file, line }` (line numbers start at 1 and count blank lines). Bytes are kept exactly,
 * only the line break (and a UTF-8 BOM before the first line) removed. Streams the file, so memory
 * holds the items but never the whole text.
 *
 * A line longer than {@link MAX_FILE_READ_BYTES} becomes a rejection holding its first bytes.
 *
 * @throws the file system error when the file cannot be read (ENOENT, EACCES, EIO…).
 */
export async function parseLinesFile(path: string, ctx: FileParseContext): Promise<IntakeItem[]> {
  const items: IntakeItem[] = [];
  let parts: Buffer[] = [];
  let partsLength = 0;
  let overlongHead: Buffer | undefined;
  let line = 1;

  const append = (segment: Buffer): void => {
    if (segment.length === 0 || overlongHead) return;
    // +1: a CR before the LF is part of the line break, not of the read.
    if (partsLength + segment.length > MAX_FILE_READ_BYTES + 1) {
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
      items.push(rejectionItem(ctx, Buffer.from(overlongHead), line, `line longer than ${MAX_FILE_READ_BYTES} bytes`));
    } else {
      let bytes = Buffer.concat(parts, partsLength);
      if (bytes.length > 0 && bytes[bytes.length - 1] === CR) bytes = bytes.subarray(0, bytes.length - 1);
      if (line === 1 && bytes.subarray(0, UTF8_BOM.length).equals(UTF8_BOM)) bytes = bytes.subarray(UTF8_BOM.length);
      if (bytes.length > MAX_FILE_READ_BYTES) {
        items.push(rejectionItem(ctx, Buffer.from(bytes.subarray(0, REJECTION_RAW_BYTES)), line, `line longer than ${MAX_FILE_READ_BYTES} bytes`));
      } else if (!isBlank(bytes)) {
        // Own copy: the slice would otherwise keep the whole 64 KiB read chunk alive.
        items.push(readItem(ctx, Buffer.from(bytes), line));
      }
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
  return items;
}
