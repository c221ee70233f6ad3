import { ErrorCodes, GatewayError } from '../../errors.js';
import type { InputRejection, IntakeItem, Read } from '../types.js';

/** What every file parser needs besides the file: who reads it and when it was received. */
export interface FileParseContext {
  inputId: string;
  /** The file's name (no folder), put in each item's `origin.file`. */
  fileName: string;
  /** `receivedAt` of every item of the file: one instant, the start of processing. */
  receivedAt: Date;
}

/**
 * Longest barcode (a line, or a CSV field) taken from a file, in bytes. Longer becomes an
 * {@link InputRejection}; far above any real symbol (a QR code holds at most 2,953 bytes) yet
 * small enough that a binary file dropped by mistake cannot hold a huge "line" in memory.
 */
export const MAX_FILE_READ_BYTES = 65_536;

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
export function readItem(ctx: FileParseContext, raw: Buffer, line: number, sourceTime?: string): IntakeItem {
  const read: Read =
    sourceTime === undefined
      ? { inputId: ctx.inputId, raw, receivedAt: ctx.receivedAt, origin: { file: ctx.fileName, line } }
      : { inputId: ctx.inputId, raw, receivedAt: ctx.receivedAt, sourceTime, origin: { file: ctx.fileName, line } };
  return { kind: 'read', read };
}

export function rejectionItem(ctx: FileParseContext, raw: Buffer, line: number, reason: string): IntakeItem {
  const rejection: InputRejection = {
    inputId: ctx.inputId,
    raw,
    receivedAt: ctx.receivedAt,
    reason,
    origin: { file: ctx.fileName, line },
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
