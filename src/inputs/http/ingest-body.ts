import type { JsonFieldsConfig } from '../schema-parts.js';
import { rejectionItem } from '../input-items.js';
import { jsonRead, readFromJsonFields } from '../json-read.js';
import type { IntakeItem } from '../types.js';

/** Bytes of an over-long code kept in its rejection: enough to recognise it, not the whole of it. */
export const OVERLONG_EXCERPT_BYTES = 256;

/** What {@link ingestBodyItems} made of a body: the items, or why the whole request is refused (400). */
export type IngestBodyResult =
  | { ok: true; items: IntakeItem[] }
  /** `field` is the offending path with the read's index (`[2].code`), '' for the body itself. */
  | { ok: false; message: string; field?: string };

/**
 * The items of one decoded ingest body (one read or an array of reads, see `jsonRead`): a read per
 * valid entry, a rejection holding the first {@link OVERLONG_EXCERPT_BYTES} bytes for a code
 * longer than `maxReadLength` bytes. One invalid entry refuses the whole request (nothing of it is
 * stored as a read). Pure: the HTTP input and `scan-gateway try --payload` share it, so `try`
 * shows what the input makes of the same body.
 */
export function ingestBodyItems(
  value: unknown,
  options: {
    inputId: string;
    fields: JsonFieldsConfig;
    receivedAt: Date;
    origin: Record<string, string | number>;
    maxReadLength: number;
  },
): IngestBodyResult {
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0) return { ok: false, message: 'no reads: the array is empty' };
  const items: IntakeItem[] = [];
  for (const [i, entry] of list.entries()) {
    const result = jsonRead(entry, options.fields);
    if (!result.ok) {
      const prefix = Array.isArray(value) ? `[${i}]` : '';
      const field =
        result.field === '' ? prefix : prefix === '' ? result.field : `${prefix}.${result.field}`;
      return {
        ok: false,
        message: `read ${Array.isArray(value) ? `${i} ` : ''}is not valid: ${result.field === '' ? '' : `${result.field} `}${result.reason}`,
        field,
      };
    }
    const readOrigin = Array.isArray(value) ? { ...options.origin, index: i } : options.origin;
    const length = Buffer.byteLength(result.fields.code, 'utf8');
    if (length > options.maxReadLength) {
      // As the other inputs: a rejection with the reason and a bounded excerpt, the request's other reads go on.
      const excerpt = Buffer.from(result.fields.code, 'utf8').subarray(0, OVERLONG_EXCERPT_BYTES);
      const reason = `read longer than maxReadLength (${options.maxReadLength} bytes): ${length} bytes; the first ${excerpt.length} are kept`;
      items.push(rejectionItem(options.inputId, excerpt, reason, options.receivedAt, readOrigin));
      continue;
    }
    items.push({
      kind: 'read',
      read: readFromJsonFields(result.fields, options.inputId, options.receivedAt, readOrigin),
    });
  }
  return { ok: true, items };
}
