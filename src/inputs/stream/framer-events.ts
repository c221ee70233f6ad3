/** What a {@link Framer} reports: complete reads and the ways a read can go wrong, in stream order. */

/** One complete read, framing removed, as its own copy of the bytes. */
export interface FrameEvent {
  kind: 'frame';
  bytes: Buffer;
}

/** Where the bytes of an overlong read stopped being dropped. */
export type OverlongEnd =
  /** `terminator` mode: its terminator came. */
  | 'terminator'
  /** `stxEtx` mode: its ETX came. */
  | 'etx'
  /** `stxEtx` mode: a new STX came before its ETX. */
  | 'stx'
  /** No byte came for a while ({@link Framer.idle}): the next byte starts a new read. */
  | 'pause'
  /** The stream ended ({@link Framer.flush}). */
  | 'end';

/**
 * A read that grew past `maxLength` bytes. Its bytes are dropped, but for the first `headBytes`,
 * up to its end (terminator, ETX, a new STX, a pause or the end of the stream); then it is
 * reported with how many bytes it had in all, and the framer carries on with the next read.
 */
export interface OverlongEvent {
  kind: 'overlong';
  /** The first `min(headBytes, maxLength + 1)` bytes of the overlong read. */
  head: Buffer;
  /** Every byte of the read up to its end, head included, framing not. */
  length: number;
  end: OverlongEnd;
}

/** `stxEtx` only: bytes outside a read, or a read whose ETX never came (a new STX did). */
export interface NoiseEvent {
  kind: 'noise';
  /** The first `headBytes` of the noise. */
  bytes: Buffer;
  reason: string;
}

/**
 * `terminator` mode with a CR or LF terminator: a complete read holding a CR or LF, which means
 * the scanner ends its reads otherwise than configured. `reason` says so and what to set.
 */
export interface LineEndEvent {
  kind: 'lineEnd';
  bytes: Buffer;
  reason: string;
}

/** The bytes of a read cut off by the end of the stream (device closed, connection lost). */
export interface PartialEvent {
  kind: 'partial';
  bytes: Buffer;
}

/**
 * With `reportEmpty`: a read with nothing in it (a terminator with no byte before it, STX right
 * before ETX). A scanner sends one when it read nothing and has no no-read text set, or when its
 * framing is set otherwise than the input's.
 */
export interface EmptyEvent {
  kind: 'empty';
  reason: string;
}

/** Everything {@link Framer.push}, `idle` and `flush` report, in stream order. */
export type FramerEvent =
  FrameEvent | OverlongEvent | NoiseEvent | LineEndEvent | PartialEvent | EmptyEvent;
