import { ErrorCodes, GatewayError } from '../../errors.js';

/**
 * Splits a byte stream (serial chunks arrive in arbitrary pieces) into reads at a terminator byte
 * sequence. Pure: no I/O, no clock, so every split position can be tested.
 *
 * Bytes are never decoded or altered: an AIM symbology identifier (`]d2`), GS (0x1D) separators,
 * NUL or invalid UTF-8 stay exactly as received; only the terminator is removed. Deciding what a
 * frame means (no-read, GS1, garbage) is the mapping's job.
 */

/** One complete read, terminator removed, as its own copy of the bytes. */
export interface FrameEvent {
  kind: 'frame';
  bytes: Buffer;
}

/**
 * A read that grew past `maxLength` bytes. Reported as soon as it is certain (the terminator may
 * never come), with only its first `headBytes` kept; the framer then drops bytes up to the next
 * terminator and carries on with the read after it.
 */
export interface OverlongEvent {
  kind: 'overlong';
  /** The first `min(headBytes, maxLength + 1)` bytes of the overlong read. */
  head: Buffer;
}

export type FramerEvent = FrameEvent | OverlongEvent;

export interface FramerOptions {
  /** Byte sequence that ends a read, at least one byte. */
  terminator: Buffer;
  /** Longest read in bytes, terminator not counted; longer is reported as `overlong`. */
  maxLength: number;
  /** How many leading bytes an overlong event keeps; default {@link DEFAULT_OVERLONG_HEAD_BYTES}. */
  headBytes?: number;
}

/** Leading bytes kept of an overlong read: enough for an operator to recognise it. */
export const DEFAULT_OVERLONG_HEAD_BYTES = 256;

const EMPTY = Buffer.alloc(0);

/**
 * The terminator as bytes. The configuration holds a JS string (YAML escapes such as `"\r\n"`
 * already resolved); each character is one byte (latin1), so `"\x03"` is the byte 0x03.
 *
 * @throws GatewayError `SCANGW_E_CONFIG` when the string is empty or holds a character above
 *   U+00FF, which has no single-byte meaning.
 */
export function terminatorBytes(terminator: string): Buffer {
  if (terminator.length === 0) {
    throw new GatewayError(ErrorCodes.CONFIG, 'serial terminator must not be empty');
  }
  for (const ch of terminator) {
    const code = ch.codePointAt(0) ?? 0;
    if (code > 0xff) {
      throw new GatewayError(
        ErrorCodes.CONFIG,
        `serial terminator may only hold byte values (\\x00-\\xff); found U+${code.toString(16).toUpperCase().padStart(4, '0')}`,
      );
    }
  }
  return Buffer.from(terminator, 'latin1');
}

export class Framer {
  private readonly terminator: Buffer;
  private readonly maxLength: number;
  private readonly headBytes: number;
  /** Bytes of the read in progress (never more than maxLength + terminator length - 1). */
  private pending: Buffer = EMPTY;
  /** True after an overlong read, until its terminator went by. */
  private discarding = false;

  constructor(options: FramerOptions) {
    if (options.terminator.length === 0) throw new RangeError('terminator must hold at least one byte');
    if (!Number.isInteger(options.maxLength) || options.maxLength < 1) throw new RangeError('maxLength must be a positive integer');
    this.terminator = Buffer.from(options.terminator);
    this.maxLength = options.maxLength;
    // Never more than maxLength + 1: that much is known as soon as a read is certainly overlong,
    // so the head does not depend on how the bytes were chunked.
    this.headBytes = Math.min(options.headBytes ?? DEFAULT_OVERLONG_HEAD_BYTES, options.maxLength + 1);
  }

  /** Feeds one chunk; returns the frames and overlong events it completed, in stream order. */
  push(chunk: Buffer): FramerEvent[] {
    const events: FramerEvent[] = [];
    let data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = EMPTY;
    const t = this.terminator.length;

    if (this.discarding) {
      // `data` starts with the last t-1 discarded bytes, so a terminator split across chunks is found.
      const idx = data.indexOf(this.terminator);
      if (idx < 0) {
        this.pending = Buffer.from(data.subarray(Math.max(0, data.length - (t - 1))));
        return events;
      }
      this.discarding = false;
      data = data.subarray(idx + t);
    }

    let start = 0;
    for (let idx = data.indexOf(this.terminator, start); idx >= 0; idx = data.indexOf(this.terminator, start)) {
      const length = idx - start;
      if (length > this.maxLength) {
        events.push({ kind: 'overlong', head: Buffer.from(data.subarray(start, start + this.headBytes)) });
      } else if (length > 0) {
        events.push({ kind: 'frame', bytes: Buffer.from(data.subarray(start, idx)) });
      }
      start = idx + t;
    }

    const rest = data.subarray(start);
    // Up to t-1 trailing bytes may be the start of a terminator, so only a longer rest is certainly overlong.
    if (rest.length > this.maxLength + t - 1) {
      events.push({ kind: 'overlong', head: Buffer.from(rest.subarray(0, this.headBytes)) });
      this.discarding = true;
      this.pending = Buffer.from(rest.subarray(rest.length - (t - 1)));
    } else if (rest.length > 0) {
      this.pending = Buffer.from(rest);
    }
    return events;
  }

  /**
   * Ends the stream (device closed): returns the bytes of an unterminated read, if any, and resets.
   * Bytes of an overlong read being discarded are not returned: that read was reported already.
   */
  flush(): Buffer | undefined {
    const rest = this.discarding ? undefined : this.pending;
    this.pending = EMPTY;
    this.discarding = false;
    return rest !== undefined && rest.length > 0 ? rest : undefined;
  }
}
