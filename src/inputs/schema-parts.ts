import { z } from 'zod';

/**
 * Schema pieces several input kinds share: byte strings, the longest read, where the fields of a
 * JSON read are. Each kind's own schema is in its folder (`src/inputs/<kind>/schema.ts`).
 */

/** Longest read (barcode) taken by default, in bytes: above any real symbol (QR: 2,953 bytes). */
export const DEFAULT_MAX_READ_LENGTH = 4096;

/**
 * A byte sequence written as text: one character per byte (`"\r\n"`, `"\x06"` in YAML double
 * quotes), so only characters U+0000–U+00FF are allowed.
 */
export const byteString = z
  .string()
  .min(1)
  .refine(
    (s) => [...s].every((ch) => (ch.codePointAt(0) ?? 0) <= 0xff),
    'may only hold byte values \\x00-\\xff, one character per byte',
  );

/** Longest read in bytes (serial, tcp, files, http). */
export const maxReadLength = z
  .number()
  .int()
  .positive()
  .max(1024 * 1024)
  .default(DEFAULT_MAX_READ_LENGTH)
  .describe(
    'Longest read in bytes; a longer one is stored as a rejection holding its first bytes.',
  );

/**
 * Where the fields of a JSON read are: dotted paths into each object (`data.code`). Used by MQTT
 * JSON payloads, ndjson/json files.
 */
/**
 * A dotted path into a JSON object: names (or list indexes) joined by dots, none empty. `.` and
 * `a..b` name nothing, so they are refused here rather than yielding nothing on every read.
 */
const jsonPath = z
  .string()
  .min(1)
  .regex(
    /^[^.]+(\.[^.]+)*$/,
    'is not a path into the payload: names joined by dots, none empty (e.g. `meas.temp`); "." names no field',
  );

export const jsonFieldsSchema = z
  .object({
    code: jsonPath.default('code').describe('Path of the barcode text (required in every read).'),
    time: jsonPath
      .default('ts')
      .describe('Path of the read time stamp, ISO 8601 (optional in a read).'),
    dcp: jsonPath.default('dcp').describe('Path of the DCP key (optional in a read).'),
    parents: jsonPath
      .default('parents')
      .describe('Path of the parent reference(s): text or a list of texts (optional).'),
    attributes: z
      .string()
      .min(1)
      .regex(
        /^[^.]+(\.[^.]+)*$/,
        'is the path of an object of attributes (e.g. `attributes`); "." is not one: to take fields of the payload itself as attributes, list them in `attributeFields` (e.g. `attributeFields: { voltage: voltage }`)',
      )
      .default('attributes')
      .describe(
        'Path of an object of attributes; text, number and boolean values are taken as text (optional). Fields outside such an object: `attributeFields`.',
      ),
    attributeFields: z
      .record(z.string().regex(/^\S+$/, 'an attribute key is text without white space'), jsonPath)
      .optional()
      .describe(
        "Attributes taken from any field of the payload, as attribute key → path (e.g. `{ voltage: voltage, temp: 'meas.temp' }`), as `attributeColumns` does for CSV. Text, number and boolean values are taken as text; a field absent from a payload adds nothing; an object or list there refuses the read with the path. A key here wins over the same key in the `attributes` object.",
      ),
  })
  .strict();

/** Where the fields of a JSON read are (`fields` of mqtt, http, ndjson/json files). */
export type JsonFieldsConfig = z.infer<typeof jsonFieldsSchema>;
