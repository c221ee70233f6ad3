import { ErrorCodes, GatewayError } from '../../errors.js';
import type { FramerEvent, OverlongEnd, OverlongEvent } from './framer-events.js';
import {
  DEFAULT_OVERLONG_HEAD_BYTES,
  type FramerOptions,
  type FramingMode,
} from './framer-options.js';

export type {
  EmptyEvent,
  FrameEvent,
  FramerEvent,
  LineEndEvent,
  NoiseEvent,
  OverlongEnd,
  OverlongEvent,
  PartialEvent,
} from './framer-events.js';
export {
  configBytes,
  DEFAULT_OVERLONG_HEAD_BYTES,
  terminatorBytes,
  type FramerOptions,
  type FramingMode,
} from './framer-options.js';

/**
 * Splits a byte stream (serial and TCP chunks arrive in arbitrary pieces) into reads. Pure: no I/O,
 * no clock, so every split position can be tested. Three ways a scanner marks a read:
 *
 * - `terminator`: the read ends at a byte sequence (CR, LF, CRLF, any bytes). With a terminator of
 *   CR alone, a LF right after it is part of the line end and dropped; with LF alone, a CR right
 *   before it is (a scanner that sends CRLF works with either). A read that still holds the other
 *   byte (a LF-only scanner on a CR terminator) is reported as `lineEnd` with a hint what to set.
 * - `stxEtx`: the read sits between a start byte (STX, 0x02) and an end byte (ETX, 0x03). Bytes
 *   between reads are noise: white space (CR, LF, space, tab, NUL, often sent after ETX) at its
 *   edges is dropped and not counted, anything else reported. An STX inside a read means its ETX
 *   was lost: the bytes so far are reported and a new read starts.
 * - `silence`: the read is whatever came before a pause; the caller's timer calls {@link Framer.idle}.
 *
 * A read longer than `maxLength` is dropped but for its first bytes up to its end, then reported
 * (`overlong`) with its length. Its end is its terminator or ETX, a new STX, or a pause: scanners
 * send a read in one burst, so the caller's timer calls {@link Framer.idle} after a pause while
 * {@link Framer.dropping}, and the next byte starts a new read (a good read right after an
 * overlong one is not lost in it).
 *
 * Bytes are never decoded or altered: an AIM symbology identifier (`]d2`), GS (0x1D) separators,
 * NUL or invalid UTF-8 stay exactly as received; only the framing bytes are removed. Deciding
 * what a read means (no-read, GS1, garbage) is the mapping's job.
 */

const EMPTY = Buffer.alloc(0);
const CR = 0x0d;
const LF = 0x0a;
/** CR, LF, space, tab, NUL: what scanners put between STX…ETX reads; not worth a rejection. */
const FILLER = new Set([CR, LF, 0x20, 0x09, 0x00]);

/**
 * The streaming framer of one byte stream (see the top of this file for the three modes). Feed
 * chunks with {@link Framer.push}, call {@link Framer.idle} after a pause (silence mode: the read
 * ends; other modes: an overlong read being dropped ends, see {@link Framer.dropping}) and
 * {@link Framer.flush} when the stream ends.
 *
 * @throws GatewayError `SCANGW_E_CONFIG` (constructor) for an empty terminator, equal STX and ETX, or `maxLength` < 1.
 */
export class Framer {
  private readonly mode: FramingMode;
  private readonly terminator: Buffer;
  private readonly stx: number;
  private readonly etx: number;
  private readonly maxLength: number;
  private readonly headBytes: number;
  private readonly reportEmpty: boolean;
  /** Terminator CR: a LF right after it belongs to the line end (a CRLF scanner) and is dropped. */
  private readonly lfAfterCr: boolean;
  /** Terminator LF: a CR right before it belongs to the line end (a CRLF scanner) and is dropped. */
  private readonly crBeforeLf: boolean;
  /**
   * `terminator` mode: trailing bytes of an unfinished read that may still turn out to be framing
   * (the start of a multi-byte terminator, the CR before a LF terminator).
   */
  private readonly slack: number;
  /** Bytes of the read in progress (terminator mode, while dropping: up to `slack` bytes not yet counted). */
  private pending: Buffer = EMPTY;
  /** True while the bytes of an overlong read are dropped, until its end. */
  private discarding = false;
  /** The overlong read being dropped: its first bytes and how many bytes it has had so far. */
  private overlongHead: Buffer = EMPTY;
  private overlongLength = 0;
  /** Terminator CR: the last byte seen was a terminator, so a LF next is dropped. */
  private skipLf = false;
  /** stxEtx: inside a read (after STX)? */
  private inside = false;
  /** stxEtx: head and length of the noise seen since the last read (filler at its edges not counted). */
  private noise: number[] = [];
  private noiseLength = 0;
  /** stxEtx: filler after the last noise byte; counted only if more noise follows. */
  private filler: number[] = [];
  private fillerLength = 0;

  constructor(options: FramerOptions) {
    this.mode = options.mode ?? 'terminator';
    if (!Number.isInteger(options.maxLength) || options.maxLength < 1)
      throw new GatewayError(ErrorCodes.CONFIG, 'maxLength must be a positive integer');
    this.terminator = Buffer.from(options.terminator ?? EMPTY);
    if (this.mode === 'terminator' && this.terminator.length === 0)
      throw new GatewayError(ErrorCodes.CONFIG, 'terminator must hold at least one byte');
    this.stx = options.stx ?? 0x02;
    this.etx = options.etx ?? 0x03;
    if (this.stx === this.etx) throw new GatewayError(ErrorCodes.CONFIG, 'stx and etx must differ');
    this.maxLength = options.maxLength;
    this.reportEmpty = options.reportEmpty ?? false;
    // Never more than maxLength + 1: that much is known as soon as a read is certainly overlong,
    // so the head does not depend on how the bytes were chunked.
    this.headBytes = Math.min(
      options.headBytes ?? DEFAULT_OVERLONG_HEAD_BYTES,
      options.maxLength + 1,
    );
    const single =
      this.mode === 'terminator' && this.terminator.length === 1 ? this.terminator[0] : undefined;
    this.lfAfterCr = single === CR;
    this.crBeforeLf = single === LF;
    this.slack = Math.max(0, this.terminator.length - 1) + (this.crBeforeLf ? 1 : 0);
  }

  /** True while the rest of an overlong read is being dropped: a pause ({@link Framer.idle}) would end it. */
  get dropping(): boolean {
    return this.discarding;
  }

  /** Feeds one chunk; returns the events it completed, in stream order. */
  push(chunk: Buffer): FramerEvent[] {
    if (this.mode === 'stxEtx') return this.pushStxEtx(chunk);
    if (this.mode === 'silence') return this.pushSilence(chunk);
    return this.pushTerminator(chunk);
  }

  /**
   * The caller saw no byte for a while. `silence` mode: the read in progress is complete. Other
   * modes: an overlong read being dropped ends here (scanners send a read in one burst, so what
   * comes after a pause is a new read); a read in progress that is not overlong is kept, since
   * only its terminator or ETX ends it.
   */
  idle(): FramerEvent[] {
    if (this.mode === 'silence') {
      if (this.discarding) return [this.endOverlong('pause')];
      const rest = this.pending;
      this.pending = EMPTY;
      return rest.length > 0 ? [{ kind: 'frame', bytes: rest }] : [];
    }
    if (!this.discarding) return [];
    // Terminator mode: bytes held back as a possible terminator were not one.
    this.overlongLength += this.pending.length;
    this.pending = EMPTY;
    this.inside = false;
    return [this.endOverlong('pause')];
  }

  /**
   * Ends the stream (device closed): returns reported noise, an overlong read being dropped, and a
   * cut-off read as `partial`, and resets.
   */
  flush(): FramerEvent[] {
    const events: FramerEvent[] = [];
    if (this.mode === 'stxEtx') this.emitNoise(events, 'bytes outside STX…ETX');
    if (this.discarding) {
      this.overlongLength += this.pending.length;
      events.push(this.endOverlong('end'));
    } else if (this.pending.length > 0) {
      events.push({ kind: 'partial', bytes: Buffer.from(this.pending) });
    }
    this.pending = EMPTY;
    this.inside = false;
    this.skipLf = false;
    return events;
  }

  /**
   * Terminator CR or LF: when `bytes` hold the other line-end byte (LF or CR), a hint that the
   * scanner ends its reads otherwise than configured, and what to set, as `<subject> holds LF
   * (0x0a) at position 8: looks like …`; undefined otherwise (and for other terminators).
   */
  lineEndHint(bytes: Buffer, subject = 'it'): string | undefined {
    if (!this.lfAfterCr && !this.crBeforeLf) return undefined;
    const other = this.lfAfterCr ? LF : CR;
    const at = bytes.indexOf(other);
    if (at < 0) return undefined;
    const [found, hex, escaped, configured] =
      other === LF ? ['LF', '0x0a', '"\\n"', 'CR'] : ['CR', '0x0d', '"\\r"', 'LF'];
    return (
      `${subject} holds ${found} (${hex}) at position ${at}: looks like the scanner ends reads with ${found}, not ${configured}; ` +
      `set terminator: ${escaped} on this input, or make the scanner send ${configured}`
    );
  }

  private endOverlong(end: OverlongEnd): OverlongEvent {
    const event: OverlongEvent = {
      kind: 'overlong',
      head: this.overlongHead,
      length: this.overlongLength,
      end,
    };
    this.overlongHead = EMPTY;
    this.overlongLength = 0;
    this.discarding = false;
    return event;
  }

  private startOverlong(head: Buffer, length: number): void {
    this.overlongHead = Buffer.from(head.subarray(0, this.headBytes));
    this.overlongLength = length;
    this.discarding = true;
  }

  /** A complete read of terminator mode: a frame, or a `lineEnd` rejection when it holds CR or LF. */
  private frame(bytes: Buffer): FramerEvent {
    const reason = this.lineEndHint(bytes, 'the read');
    if (reason === undefined) return { kind: 'frame', bytes: Buffer.from(bytes) };
    return { kind: 'lineEnd', bytes: Buffer.from(bytes), reason };
  }

  /** Where the next read starts after a terminator ending at `pos`: past a LF that completes a CRLF. */
  private afterTerminator(data: Buffer, pos: number): number {
    if (!this.lfAfterCr) return pos;
    if (pos === data.length) this.skipLf = true;
    else if (data[pos] === LF) return pos + 1;
    return pos;
  }

  /** End of the read whose terminator starts at `idx`: before a CR that belongs to a CRLF. */
  private readEnd(data: Buffer, start: number, idx: number): number {
    return this.crBeforeLf && idx > start && data[idx - 1] === CR ? idx - 1 : idx;
  }

  private pushTerminator(chunk: Buffer): FramerEvent[] {
    const events: FramerEvent[] = [];
    if (chunk.length === 0) return events;
    if (this.skipLf) {
      this.skipLf = false;
      if (chunk[0] === LF) chunk = chunk.subarray(1);
    }
    let data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = EMPTY;
    const t = this.terminator.length;

    if (this.discarding) {
      // `data` starts with the last `slack` bytes of the read, not yet counted: a terminator split
      // across chunks is found, and the CR of a CRLF is not counted into the read.
      const idx = data.indexOf(this.terminator);
      if (idx < 0) {
        const keep = Math.min(this.slack, data.length);
        this.overlongLength += data.length - keep;
        this.pending = Buffer.from(data.subarray(data.length - keep));
        return events;
      }
      this.overlongLength += this.readEnd(data, 0, idx);
      events.push(this.endOverlong('terminator'));
      data = data.subarray(this.afterTerminator(data, idx + t));
    }

    let start = 0;
    for (
      let idx = data.indexOf(this.terminator, start);
      idx >= 0;
      idx = data.indexOf(this.terminator, start)
    ) {
      const end = this.readEnd(data, start, idx);
      const length = end - start;
      if (length > this.maxLength) {
        events.push({
          kind: 'overlong',
          head: Buffer.from(data.subarray(start, start + this.headBytes)),
          length,
          end: 'terminator',
        });
      } else if (length > 0) {
        events.push(this.frame(data.subarray(start, end)));
      } else if (this.reportEmpty) {
        events.push({ kind: 'empty', reason: 'empty read: its terminator with nothing before it' });
      }
      start = this.afterTerminator(data, idx + t);
    }

    const rest = data.subarray(start);
    // Up to `slack` trailing bytes may still be framing, so only a longer rest is certainly overlong.
    if (rest.length > this.maxLength + this.slack) {
      this.startOverlong(rest, rest.length - this.slack);
      this.pending = Buffer.from(rest.subarray(rest.length - this.slack));
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
        this.pending = EMPTY;
        i = s + 1;
        continue;
      }
      const e = chunk.indexOf(this.etx, i);
      const s = chunk.indexOf(this.stx, i);
      const end = e >= 0 && (s < 0 || e < s) ? e : s;
      const segment = chunk.subarray(i, end < 0 ? chunk.length : end);
      if (this.discarding) {
        this.overlongLength += segment.length;
      } else if (this.pending.length + segment.length > this.maxLength) {
        this.startOverlong(
          Buffer.concat([this.pending, segment.subarray(0, this.headBytes)]),
          this.pending.length + segment.length,
        );
        this.pending = EMPTY;
      } else if (segment.length > 0) {
        this.pending = Buffer.concat([this.pending, segment]);
      }
      if (end < 0) break;
      if (this.discarding) {
        events.push(this.endOverlong(end === e ? 'etx' : 'stx'));
      } else if (end === e) {
        if (this.pending.length > 0) events.push({ kind: 'frame', bytes: this.pending });
        else if (this.reportEmpty)
          events.push({ kind: 'empty', reason: 'empty read: nothing between STX and ETX' });
      } else if (this.pending.length > 0) {
        events.push({
          kind: 'noise',
          bytes: this.pending.subarray(0, this.headBytes),
          reason: 'read without ETX (a new STX came first)',
        });
      }
      if (end === e) this.inside = false;
      this.pending = EMPTY;
      i = end + 1;
    }
    return events;
  }

  /**
   * Noise between reads. Filler (CR, LF, space, tab, NUL) before the first and after the last
   * other byte is not noise (the CR LF scanners send after ETX); filler between noise bytes is.
   */
  private addNoise(bytes: Buffer): void {
    for (const b of bytes) {
      if (FILLER.has(b)) {
        if (this.noiseLength === 0) continue;
        if (this.filler.length < this.headBytes) this.filler.push(b);
        this.fillerLength += 1;
        continue;
      }
      if (this.fillerLength > 0) {
        for (const f of this.filler) if (this.noise.length < this.headBytes) this.noise.push(f);
        this.noiseLength += this.fillerLength;
        this.filler = [];
        this.fillerLength = 0;
      }
      if (this.noise.length < this.headBytes) this.noise.push(b);
      this.noiseLength += 1;
    }
  }

  private emitNoise(events: FramerEvent[], reason: string): void {
    if (this.noiseLength > 0)
      events.push({
        kind: 'noise',
        bytes: Buffer.from(this.noise),
        reason: `${reason} (${this.noiseLength} bytes)`,
      });
    this.noise = [];
    this.noiseLength = 0;
    this.filler = [];
    this.fillerLength = 0;
  }

  private pushSilence(chunk: Buffer): FramerEvent[] {
    if (this.discarding) {
      this.overlongLength += chunk.length;
      return [];
    }
    if (this.pending.length + chunk.length > this.maxLength) {
      this.startOverlong(
        Buffer.concat([this.pending, chunk.subarray(0, this.headBytes)]),
        this.pending.length + chunk.length,
      );
      this.pending = EMPTY;
      return [];
    }
    this.pending = Buffer.concat([this.pending, chunk]);
    return [];
  }
}
