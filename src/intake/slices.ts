import { GatewayError } from '../errors.js';
import type { SubmitResult } from '../inputs/types.js';

/**
 * Most reads of submits taken in slices (`SubmitOptions.inSlices`) mapped and committed in one
 * turn of the event loop. A 10,000-read ingest request is then some 40 commits, each a few ms, and
 * a probe or a scanner's ACK waits for one of them, not for the whole request; a commit costs
 * little more per read at this size than at 10,000 (one fsync per commit in WAL mode).
 */
export const SLICE_READS = 256;

/**
 * Longest a turn maps the reads of sliced submits, in ms, on the monotonic clock: a slow read
 * (a long GS1 code, a rule with many attributes) ends the slice early, so a slice stays short on
 * a busy machine too. At least one read is mapped per turn.
 */
export const SLICE_MAP_BUDGET_MS = 5;

/** Where a submit taken in slices stands. */
export interface SliceState {
  /** Index of the next item to map. */
  next: number;
  /** Items of the committed slices. */
  committed: number;
  /** The outcomes of the committed slices, in the items' order. */
  outcomes: SubmitResult['outcomes'];
  /** Resolved or rejected: nothing more of it is taken. */
  settled: boolean;
}

/**
 * The refusal of a slice as the whole submit's: the same code, message and retryability, with
 * `details.committedItems`, the leading items committed by the slices before it. A new error each
 * time: one refusal is shared by every submit of a group.
 */
export function refusalAfter(err: unknown, committedItems: number): unknown {
  if (!(err instanceof GatewayError)) return err;
  return new GatewayError(err.code, err.message, {
    cause: err.cause,
    retryable: err.retryable,
    details: { ...err.details, committedItems },
  });
}
