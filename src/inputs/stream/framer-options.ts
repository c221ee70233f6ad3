import { ErrorCodes, GatewayError } from '../../errors.js';

/** How a scanner marks the end of a read (config key `framing`). */
export type FramingMode = 'terminator' | 'stxEtx' | 'silence';

/** Options of a {@link Framer}; bytes, not configuration text (see {@link configBytes}). */
export interface FramerOptions {
  /** Default `terminator`. */
  mode?: FramingMode;
  /** `terminator` mode: byte sequence that ends a read, at least one byte. */
  terminator?: Buffer;
  /** `stxEtx` mode: start and end byte; default 0x02 and 0x03. */
  stx?: number;
  etx?: number;
  /** Longest read in bytes, framing not counted; longer is reported as `overlong`. */
  maxLength: number;
  /** How many leading bytes an overlong or noise event keeps; default {@link DEFAULT_OVERLONG_HEAD_BYTES}. */
  headBytes?: number;
  /** Report an empty read as an {@link EmptyEvent} (the inputs do); default false: it is skipped. */
  reportEmpty?: boolean;
}

/** Leading bytes kept of an overlong read: enough for an operator to recognise it. */
export const DEFAULT_OVERLONG_HEAD_BYTES = 256;

/**
 * A configured byte string as bytes: each character is one byte (latin1), so `"\x03"` is 0x03.
 *
 * @throws GatewayError `SCANGW_E_CONFIG` when the string is empty or holds a character above
 *   U+00FF, which has no single-byte meaning.
 */
export function configBytes(text: string, what = 'serial terminator'): Buffer {
  if (text.length === 0) throw new GatewayError(ErrorCodes.CONFIG, `${what} must not be empty`);
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (code > 0xff) {
      throw new GatewayError(
        ErrorCodes.CONFIG,
        `${what} may only hold byte values (\\x00-\\xff); found U+${code.toString(16).toUpperCase().padStart(4, '0')}`,
      );
    }
  }
  return Buffer.from(text, 'latin1');
}

/** {@link configBytes} for a terminator (kept under its old name for callers and tests). */
export function terminatorBytes(terminator: string): Buffer {
  return configBytes(terminator, 'serial terminator');
}
