import { DEFAULT_MAX_READ_LENGTH } from '../../config/input-schemas.js';
import { ErrorCodes, GatewayError } from '../../errors.js';
import type { InputRejection, IntakeItem, Read } from '../types.js';

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
  return ctx.sha256 === undefined ? { file: ctx.fileName, line } : { file: ctx.fileName, line, sha256: ctx.sha256 };
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
export function readItem(ctx: FileParseContext, raw: Buffer, line: number, sourceTime?: string, extras?: ReadExtras): IntakeItem {
  const origin = originOf(ctx, line);
  let read: Read =
    sourceTime === undefined
      ? { inputId: ctx.inputId, raw, receivedAt: ctx.receivedAt, origin }
      : { inputId: ctx.inputId, raw, receivedAt: ctx.receivedAt, sourceTime, origin };
  if (extras) read = { ...read, ...extras };
  return { kind: 'read', read };
}

export function rejectionItem(ctx: FileParseContext, raw: Buffer, line: number, reason: string): IntakeItem {
  const rejection: InputRejection = {
    inputId: ctx.inputId,
    raw,
    receivedAt: ctx.receivedAt,
    reason,
    origin: originOf(ctx, line),
  };
  return { kind: 'rejection', rejection };
}

/** True for a line or field holding nothing but spaces and tabs (a blank spreadsheet row). */
export function isBlank(bytes: Buffer | string): boolean {
  for (let i = 0; i < bytes.length; i++) {
    const c = typeof bytes === 'string' ? bytes.charCodeAt(i) : (bytes[i] as number);
    if (c !== 0x20 && c !== 0x09) return false;
  }
  return true;
}
