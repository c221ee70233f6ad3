import type { FileHandle } from 'node:fs/promises';
import { basename } from 'node:path';
import { DEFAULT_MAX_READ_LENGTH } from '../schema-parts.js';
import { ErrorCodes, GatewayError } from '../../errors.js';
import type { InputRejection, IntakeItem, Read } from '../types.js';
import { openInboxFile } from './safe-open.js';

/** What every file parser needs besides the file: who reads it and when it was received. */
export interface FileParseContext {
  inputId: string;
  /** The file's name (no folder), put in each item's `origin.file`. */
  fileName: string;
  /** `receivedAt` of every item of the file: one instant, the start of processing. */
  receivedAt: Date;
  /** Longest barcode taken, in bytes (the input's `maxReadLength`); default {@link MAX_FILE_READ_BYTES}. */
  maxReadLength?: number;
  /** SHA-256 (hex) of the file's content, put in each item's `origin.sha256`. */
  sha256?: string;
}

/** The parts of a read a file format may supply besides the barcode and time stamp. */
export interface ReadExtras {
  dcpKey?: string;
  parents?: string[];
  attributes?: Record<string, string>;
}

/**
 * Longest barcode (a line, or a CSV field) taken from a file by default, in bytes (the
 * `maxReadLength` default). Longer becomes an {@link InputRejection}; above any real symbol (a QR
 * code holds at most 2,953 bytes) yet small enough that a binary file dropped by mistake cannot
 * hold a huge "line" in memory.
 */
export const MAX_FILE_READ_BYTES = DEFAULT_MAX_READ_LENGTH;

/** The read length limit of a parse. */
export function maxReadLengthOf(ctx: FileParseContext): number {
  return ctx.maxReadLength ?? MAX_FILE_READ_BYTES;
}

function originOf(ctx: FileParseContext, line: number): Record<string, string | number> {
  return ctx.sha256 === undefined
    ? { file: ctx.fileName, line }
    : { file: ctx.fileName, line, sha256: ctx.sha256 };
}

/** Leading bytes kept as `raw` of a rejected overlong line or row. */
export const REJECTION_RAW_BYTES = 256;

/** UTF-8 byte order mark, written by Excel's "CSV UTF-8" and Windows Notepad. */
export const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/**
 * The error for a file that cannot be taken at all (no header, no barcode column, broken quoting):
 * the whole file goes to `failed/` with this message beside it.
 */
export function fileFormatError(fileName: string, message: string, cause?: unknown): GatewayError {
  return new GatewayError(ErrorCodes.INPUT, message, { cause, details: { file: fileName } });
}

/**
 * One read of a file. Built as a literal with a fixed shape (no spread): a 50 MB file makes half a
 * million of these, and V8 keeps same-shaped objects compact.
 */
export function readItem(
  ctx: FileParseContext,
  raw: Buffer,
  line: number,
  sourceTime?: string,
  extras?: ReadExtras,
): IntakeItem {
  const origin = originOf(ctx, line);
  let read: Read =
    sourceTime === undefined
      ? { inputId: ctx.inputId, raw, receivedAt: ctx.receivedAt, origin }
      : { inputId: ctx.inputId, raw, receivedAt: ctx.receivedAt, sourceTime, origin };
  if (extras) read = { ...read, ...extras };
  return { kind: 'read', read };
}

export function rejectionItem(
  ctx: FileParseContext,
  raw: Buffer,
  line: number,
  reason: string,
): IntakeItem {
  const rejection: InputRejection = {
    inputId: ctx.inputId,
    raw,
    receivedAt: ctx.receivedAt,
    reason,
    origin: originOf(ctx, line),
  };
  return { kind: 'rejection', rejection };
}

/** Message of a file refused as UTF-16 (every format). */
export const UTF16_MESSAGE =
  'file is UTF-16 encoded; export it as UTF-8 (Excel: "CSV UTF-8"; Notepad: "Save as", encoding UTF-8)';

/** Bytes looked at to recognise UTF-16 without a byte order mark. */
const SNIFF_BYTES = 64;

/**
 * Looks at the first bytes of a file of any format: the length of a UTF-8 BOM to skip (0 or 3),
 * or a {@link fileFormatError} when the file is UTF-16 (a UTF-16 byte order mark, or text whose
 * every other byte is NUL, as "A\0B\0"): its bytes are not text in any format taken, and would
 * otherwise become a rejection per line.
 *
 * @throws the file system error when the file cannot be opened.
 */
export async function checkEncoding(handle: FileHandle, fileName: string): Promise<number> {
  const buffer = Buffer.alloc(SNIFF_BYTES);
  const { bytesRead } = await handle.read(buffer, 0, SNIFF_BYTES, 0);
  const head = buffer.subarray(0, bytesRead);
  if (head.length >= 3 && head.subarray(0, 3).equals(UTF8_BOM)) return 3;
  if (
    head.length >= 2 &&
    ((head[0] === 0xff && head[1] === 0xfe) || (head[0] === 0xfe && head[1] === 0xff))
  ) {
    throw fileFormatError(fileName, UTF16_MESSAGE);
  }
  if (looksLikeUtf16WithoutBom(head)) throw fileFormatError(fileName, UTF16_MESSAGE);
  return 0;
}

/** At least two characters, all ASCII, stored as two bytes each with the NUL before or after. */
function looksLikeUtf16WithoutBom(head: Buffer): boolean {
  const pairs = Math.floor(head.length / 2);
  if (pairs < 2) return false;
  for (const nulAt of [0, 1]) {
    let all = true;
    for (let i = 0; i < pairs * 2 && all; i += 2) {
      const nul = head[i + nulAt] as number;
      const other = head[i + 1 - nulAt] as number;
      all = nul === 0 && other !== 0 && other < 0x80;
    }
    if (all) return true;
  }
  return false;
}

/** True for a line or field holding nothing but spaces and tabs (a blank spreadsheet row). */
export function isBlank(bytes: Buffer | string): boolean {
  for (let i = 0; i < bytes.length; i++) {
    const c = typeof bytes === 'string' ? bytes.charCodeAt(i) : (bytes[i] as number);
    if (c !== 0x20 && c !== 0x09) return false;
  }
  return true;
}

/**
 * A file to parse: an open handle (the files input opens every inbox file once, safely, and
 * parses through that descriptor), or a path, opened here with {@link openInboxFile} (a regular
 * file only, never through a link).
 */
export type FileSource = string | FileHandle;

/** Runs `fn` with the source's handle; a path is opened (and closed) here. */
export async function withSource<T>(
  source: FileSource,
  fn: (handle: FileHandle) => Promise<T>,
): Promise<T> {
  if (typeof source !== 'string') return fn(source);
  const { handle } = await openInboxFile(source, basename(source));
  try {
    return await fn(handle);
  } finally {
    await handle.close();
  }
}

/**
 * Where a parser hands its items, a chunk at a time ({@link FILE_CHUNK_ROWS} items, the last one
 * fewer). The parser awaits it before reading on: a slow or refusing buffer holds the parse
 * (back-pressure), and memory holds one chunk, not the file.
 */
export type ItemsOut = (items: IntakeItem[]) => Promise<void>;

/** Items per chunk a file is committed in: one SQLite transaction each. */
export const FILE_CHUNK_ROWS = 2000;

/**
 * Collects the items a parser makes inside one block of the file (synchronous callbacks) and hands
 * them on in chunks of `size` when the parser calls {@link drain} between blocks.
 */
export class ItemChunker {
  private items: IntakeItem[] = [];

  constructor(
    private readonly out: ItemsOut,
    private readonly size: number = FILE_CHUNK_ROWS,
  ) {}

  push(item: IntakeItem): void {
    this.items.push(item);
  }

  /** Hands on every full chunk. */
  async drain(): Promise<void> {
    while (this.items.length >= this.size) await this.out(this.items.splice(0, this.size));
  }

  /** Hands on everything left (the last, shorter chunk). */
  async end(): Promise<void> {
    await this.drain();
    if (this.items.length > 0) await this.out(this.items.splice(0));
  }
}

/**
 * The chunker of a parse: to `out` when given; otherwise into the returned array (a whole small
 * file or part at once: unit tests, the growth watch).
 */
export function chunkerFor(out: ItemsOut | undefined): {
  chunker: ItemChunker;
  collected: IntakeItem[];
} {
  const collected: IntakeItem[] = [];
  const chunker = new ItemChunker(
    out ??
      (async (items) => {
        for (const item of items) collected.push(item);
      }),
  );
  return { chunker, collected };
}

/**
 * Bytes `[start, end)` of an open file (`end` default: its end as it is read), in blocks of
 * `blockSize`, read with positional reads on the handle (which stays open: a stream made by
 * `FileHandle.createReadStream` closes it when done, whatever `autoClose` says). Each block is a
 * fresh buffer the caller may keep, unless `reuse`: then it is overwritten by the next block.
 */
export async function* readBlocks(
  handle: FileHandle,
  start = 0,
  end = Infinity,
  blockSize = 64 * 1024,
  reuse = false,
): AsyncGenerator<Buffer> {
  let position = start;
  // `reuse`: one buffer for every block, for callers done with a block before asking for the next
  // (hashing, decoding to text): a gigabyte read is then not a gigabyte of garbage for the GC.
  const shared = reuse
    ? Buffer.allocUnsafe(Math.min(blockSize, Math.max(0, end - start)))
    : undefined;
  while (position < end) {
    const length = Math.min(blockSize, end - position);
    const buffer = shared ?? Buffer.allocUnsafe(length);
    const { bytesRead } = await handle.read(buffer, 0, length, position);
    if (bytesRead === 0) return;
    position += bytesRead;
    // (A shared buffer is longer than the last block: only what was read now.)
    yield bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead);
  }
}
