import { ErrorCodes, GatewayError } from '../../errors.js';

/**
 * Splits a byte stream (serial and TCP chunks arrive in arbitrary pieces) into reads. Pure: no I/O,
 * no clock, so every split position can be tested. Three ways a scanner marks a read:
 *
 * - `terminator`: the read ends at a byte sequence (CR, LF, CRLF, any bytes).
 * - `stxEtx`: the read sits between a start byte (STX, 0x02) and an end byte (ETX, 0x03). Bytes
 *   between reads are noise: white space (CR, LF, space, tab, NUL, often sent after ETX) is
 *   dropped, anything else reported. An STX inside a read means its ETX was lost: the bytes so far
 *   are reported and a new read starts.
 * - `silence`: the read is whatever came before a pause; the caller's timer calls {@link Framer.idle}.
 *
 * Bytes are never decoded or altered: an AIM symbology identifier (`]d2`), GS (0x1D) separators,
 * NUL or invalid UTF-8 stay exactly as received; only the framing bytes are removed. Deciding
 * what a read means (no-read, GS1, garbage) is the mapping's job.
 */

/** One complete read, framing removed, as its own copy of the bytes. */
export interface FrameEvent {
  kind: 'frame';
  bytes: Buffer;
}

/**
 * A read that grew past `maxLength` bytes. Reported as soon as it is certain (the end may never
 * come), with only its first `headBytes` kept; the framer then drops bytes up to the end of that
 * read and carries on with the read after it.
 */
export interface OverlongEvent {
  kind: 'overlong';
  /** The first `min(headBytes, maxLength + 1)` bytes of the overlong read. */
  head: Buffer;
}

/** `stxEtx` only: bytes outside a read, or a read whose ETX never came (a new STX did). */
export interface NoiseEvent {
  kind: 'noise';
  /** The first `headBytes` of the noise. */
  bytes: Buffer;
  reason: string;
}

/** The bytes of a read cut off by the end of the stream (device closed, connection lost). */
export interface PartialEvent {
  kind: 'partial';
  bytes: Buffer;
}

/** Everything {@link Framer.push}, `idle` and `flush` report, in stream order. */
export type FramerEvent = FrameEvent | OverlongEvent | NoiseEvent | PartialEvent;

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
}

/** Leading bytes kept of an overlong read: enough for an operator to recognise it. */
export const DEFAULT_OVERLONG_HEAD_BYTES = 256;

const EMPTY = Buffer.alloc(0);
/** CR, LF, space, tab, NUL: what scanners put between STX…ETX reads; not worth a rejection. */
const FILLER = new Set([0x0d, 0x0a, 0x20, 0x09, 0x00]);

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

/**
 * The streaming framer of one byte stream (see the top of this file for the three modes). Feed
 * chunks with {@link Framer.push}, call {@link Framer.idle} after a pause (silence mode) and
 * {@link Framer.flush} when the stream ends.
 *
 * @throws RangeError (constructor) for an empty terminator, equal STX and ETX, or `maxLength` < 1.
 */
export class Framer {
  private readonly mode: FramingMode;
  private readonly terminator: Buffer;
  private readonly stx: number;
  private readonly etx: number;
  private readonly maxLength: number;
  private readonly headBytes: number;
  /** Bytes of the read in progress. */
  private pending: Buffer = EMPTY;
  /** True after an overlong read, until its end went by. */
  private discarding = false;
  /** stxEtx: inside a read (after STX)? */
  private inside = false;
  /** stxEtx: head of the noise seen since the last read, and whether any of it is more than filler. */
  private noise: Buffer = EMPTY;
  private noiseLength = 0;
  private noiseMatters = false;

  constructor(options: FramerOptions) {
    this.mode = options.mode ?? 'terminator';
    if (!Number.isInteger(options.maxLength) || options.maxLength < 1) throw new RangeError('maxLength must be a positive integer');
    this.terminator = Buffer.from(options.terminator ?? EMPTY);
    if (this.mode === 'terminator' && this.terminator.length === 0) throw new RangeError('terminator must hold at least one byte');
    this.stx = options.stx ?? 0x02;
    this.etx = options.etx ?? 0x03;
    if (this.stx === this.etx) throw new RangeError('stx and etx must differ');
    this.maxLength = options.maxLength;
    // Never more than maxLength + 1: that much is known as soon as a read is certainly overlong,
    // so the head does not depend on how the bytes were chunked.
    this.headBytes = Math.min(options.headBytes ?? DEFAULT_OVERLONG_HEAD_BYTES, options.maxLength + 1);
  }

  /** Feeds one chunk; returns the events it completed, in stream order. */
  push(chunk: Buffer): FramerEvent[] {
    if (this.mode === 'stxEtx') return this.pushStxEtx(chunk);
    if (this.mode === 'silence') return this.pushSilence(chunk);
    return this.pushTerminator(chunk);
  }

  /**
   * `silence` mode: the caller saw no byte for its silence time, so the read in progress is
   * complete. Other modes: nothing (a pause means nothing there).
   */
  idle(): FramerEvent[] {
    if (this.mode !== 'silence') return [];
    const rest = this.pending;
    this.pending = EMPTY;
    const wasDiscarding = this.discarding;
    this.discarding = false;
    return !wasDiscarding && rest.length > 0 ? [{ kind: 'frame', bytes: rest }] : [];
  }

  /**
   * Ends the stream (device closed): returns a cut-off read as `partial` and reported noise, and
   * resets. Bytes of an overlong read being discarded are not returned: that read was reported.
   */
  flush(): FramerEvent[] {
    const events: FramerEvent[] = [];
    if (this.mode === 'stxEtx') this.emitNoise(events, 'bytes outside STX…ETX');
    const rest = this.discarding ? EMPTY : this.pending;
    if (rest.length > 0) events.push({ kind: 'partial', bytes: Buffer.from(rest) });
    this.pending = EMPTY;
    this.discarding = false;
    this.inside = false;
    return events;
  }

  private pushTerminator(chunk: Buffer): FramerEvent[] {
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

  private pushStxEtx(chunk: Buffer): FramerEvent[] {
    const events: FramerEvent[] = [];
    let i = 0;
    while (i < chunk.length) {
      if (!this.inside) {
        const s = chunk.indexOf(this.stx, i);
        this.addNoise(chunk.subarray(i, s < 0 ? chunk.length : s));
        if (s < 0) break;
        this.emitNoise(events, 'bytes outside STX…ETX');
        this.inside = true;
        this.discarding = false;
        this.pending = EMPTY;
        i = s + 1;
        continue;
      }
      const e = chunk.indexOf(this.etx, i);
      const s = chunk.indexOf(this.stx, i);
      const end = e >= 0 && (s < 0 || e < s) ? e : s;
      const segment = chunk.subarray(i, end < 0 ? chunk.length : end);
      if (!this.discarding) {
        if (this.pending.length + segment.length > this.maxLength) {
          const head = Buffer.concat([this.pending, segment.subarray(0, this.headBytes)]).subarray(0, this.headBytes);
          events.push({ kind: 'overlong', head: Buffer.from(head) });
          this.discarding = true;
          this.pending = EMPTY;
        } else if (segment.length > 0) {
          this.pending = Buffer.concat([this.pending, segment]);
        }
      }
      if (end < 0) break;
      if (end === e) {
        if (!this.discarding && this.pending.length > 0) events.push({ kind: 'frame', bytes: this.pending });
        this.inside = false;
      } else if (!this.discarding && this.pending.length > 0) {
        events.push({ kind: 'noise', bytes: this.pending.subarray(0, this.headBytes), reason: 'read without ETX (a new STX came first)' });
      }
      this.pending = EMPTY;
      this.discarding = false;
      i = end + 1;
    }
    return events;
  }

  private addNoise(bytes: Buffer): void {
    if (bytes.length === 0) return;
    if (this.noise.length < this.headBytes) this.noise = Buffer.concat([this.noise, bytes.subarray(0, this.headBytes - this.noise.length)]);
    this.noiseLength += bytes.length;
    if (!this.noiseMatters) for (const b of bytes) if (!FILLER.has(b)) { this.noiseMatters = true; break; }
  }

  private emitNoise(events: FramerEvent[], reason: string): void {
    if (this.noiseMatters) events.push({ kind: 'noise', bytes: this.noise, reason: `${reason} (${this.noiseLength} bytes)` });
    this.noise = EMPTY;
    this.noiseLength = 0;
    this.noiseMatters = false;
  }

  private pushSilence(chunk: Buffer): FramerEvent[] {
    if (this.discarding) return [];
    if (this.pending.length + chunk.length > this.maxLength) {
      const head = Buffer.concat([this.pending, chunk.subarray(0, this.headBytes)]).subarray(0, this.headBytes);
      this.pending = EMPTY;
      this.discarding = true;
      return [{ kind: 'overlong', head: Buffer.from(head) }];
    }
    this.pending = Buffer.concat([this.pending, chunk]);
    return [];
  }
}
