import { rejectionItem } from '../input-items.js';
import { DEFAULT_MAX_READ_LENGTH } from '../schema-parts.js';
import type { IntakeItem } from '../types.js';
import { ingestBodyItems } from './ingest-body.js';
import { INGEST_PATH } from './ingest-routes.js';
import type { HttpInputConfig } from './schema.js';

/**
 * `try --payload` for an http input: one request body, a read or an array of reads, parsed as the
 * route does ({@link ingestBodyItems}); a body the route answers 400 comes back as one rejection.
 */
export function bodyItems(input: HttpInputConfig, payload: Buffer, receivedAt: Date): IntakeItem[] {
  const origin = { http: `POST ${INGEST_PATH}`, peer: 'scan-gateway try' };
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload));
  } catch (err) {
    return [
      rejectionItem(
        input.id,
        payload,
        err instanceof SyntaxError
          ? `body is not JSON: ${err.message} (the input answers 400)`
          : 'body is not valid UTF-8 (the input answers 400)',
        receivedAt,
        origin,
      ),
    ];
  }
  const parsed = ingestBodyItems(value, {
    inputId: input.id,
    fields: input.fields,
    receivedAt,
    origin,
    maxReadLength: input.maxReadLength ?? DEFAULT_MAX_READ_LENGTH,
  });
  if (!parsed.ok)
    return [
      rejectionItem(
        input.id,
        payload,
        `${parsed.message}${parsed.field ? ` (field ${parsed.field})` : ''} (the input answers 400)`,
        receivedAt,
        origin,
      ),
    ];
  return parsed.items;
}
