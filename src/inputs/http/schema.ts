import { z } from 'zod';
import { inputBaseKeys } from '../../config/input-kind.js';
import { jsonFieldsSchema, maxReadLength } from '../schema-parts.js';

/** `type: http`: `POST /api/v1/reads` on the local server (docs/inputs.md, "http"). */
export const httpInputSchema = z
  .object({
    ...inputBaseKeys,
    type: z.literal('http'),
    tokenFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'File holding the bearer token clients must send (e.g. a systemd credential); at least 16 characters.',
      ),
    tokenEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
      .default('SCAN_GATEWAY_INGEST_TOKEN')
      .describe(
        'Environment variable holding the bearer token (at least 16 characters); checked before tokenFile.',
      ),
    maxBodyBytes: z
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024)
      .default(1024 * 1024)
      .describe('Largest request body, in bytes; larger is answered 413.'),
    maxReadsPerRequest: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(10_000)
      .describe('Most reads in one request; more is answered 413.'),
    maxReadsInFlight: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(20_000)
      .describe(
        'Most reads of requests being stored at once (received, parsed, not yet committed); a request past it is answered 503 with Retry-After, before its body is read when the reads in flight are at it already. A request is always taken when none is in flight. Bounds the memory ingest holds.',
      ),
    retryAfterSec: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(5)
      .describe('Retry-After of a 503 answer (intake paused), in s.'),
    fields: jsonFieldsSchema
      .prefault({})
      .describe('Where the fields of a read are in each posted object.'),
    maxReadLength,
  })
  .strict();

/** One `type: http` entry, as the schema makes it. */
export type HttpInputConfig = z.infer<typeof httpInputSchema>;
