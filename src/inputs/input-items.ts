import type { InputRejection, IntakeItem, Read } from './types.js';
import type { VerdictReason } from '../config/verdict-reasons.js';

/**
 * Builders of the items adapters hand to the sink, shared by every adapter so a rejection looks
 * the same whichever way it came in.
 */

/**
 * Most bytes of a rejected input kept as its `raw`: enough for an operator to recognise a payload,
 * small enough that a flood of 2 MB poison messages cannot fill the buffer.
 */
export const REJECTION_RAW_MAX_BYTES = 4096;

/** An {@link InputRejection} item; `raw` is cut to {@link REJECTION_RAW_MAX_BYTES} (own copy). */
export function rejectionItem(
  inputId: string,
  raw: Buffer,
  reason: string,
  receivedAt: Date,
  origin?: Record<string, string | number>,
  code?: VerdictReason,
): IntakeItem {
  const rejection: InputRejection = {
    inputId,
    raw: Buffer.from(raw.subarray(0, REJECTION_RAW_MAX_BYTES)),
    receivedAt,
    reason:
      raw.length > REJECTION_RAW_MAX_BYTES
        ? `${reason} (first ${REJECTION_RAW_MAX_BYTES} of ${raw.length} bytes kept)`
        : reason,
    ...(origin ? { origin } : {}),
    ...(code ? { code } : {}),
  };
  return { kind: 'rejection', rejection };
}

/** A read item. */
export function readItem(read: Read): IntakeItem {
  return { kind: 'read', read };
}
