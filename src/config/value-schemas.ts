import { z } from 'zod';
import { lookupAi } from '../gs1/index.js';

/**
 * The building blocks of the mapping sections (rules-schema.ts): a GS1 AI, where one value of a
 * Scan comes from, and which reads a rule applies to. What each key means is in its
 * `.describe()`, which docs/configuration.md is generated from.
 */

/** A GS1 Application Identifier that the AI table knows (GS1 General Specifications 3.2). */
export const aiSchema = z
  .string()
  .regex(/^\d{2,4}$/, 'a GS1 Application Identifier is 2 to 4 digits, e.g. "21"')
  .refine((ai) => lookupAi(ai) !== undefined, {
    message: 'is not a GS1 Application Identifier (see the GS1 General Specifications, section 3)',
  })
  .describe(
    'GS1 Application Identifier, e.g. "01" (GTIN), "10" (batch), "21" (serial), "00" (SSCC).',
  );

/** Names of the sources a value can come from; exactly one per value. */
export const VALUE_SOURCES = ['code', 'ai', 'gs1', 'group', 'field', 'sourceDcp', 'value'] as const;

/**
 * Where one value of a Scan comes from: the code, a GS1 AI, the canonical GS1 reference, a named group of the rule's regex, a
 * field the source supplied, the DCP the source named, or a fixed text; optionally translated
 * through a lookup table.
 */
export const valueSourceSchema = z
  .object({
    code: z
      .enum(['whole', 'data'])
      .optional()
      .describe(
        'The code itself: `whole` = exactly as read (AIM symbology identifier and GS bytes included); `data` = without the symbology identifier.',
      ),
    ai: aiSchema
      .optional()
      .describe(
        'The value of this GS1 Application Identifier in the code (quote it in YAML: "01").',
      ),
    gs1: z
      .enum(['canonical'])
      .optional()
      .describe(
        '`canonical` = the one identifier of a GS1 read whatever carried it (GS1 DataMatrix or GS1-128 with or without symbology identifier, bracketed text, a Digital Link URI on any domain): the GS1 Digital Link URI on https://id.gs1.org with the primary key and its key qualifiers only, e.g. `https://id.gs1.org/01/09521234543213/21/C2611030001234`. No value for a plain code or one without a primary key. Which AIs identify: docs/configuration.md, "The canonical GS1 reference".',
      ),
    group: z
      .string()
      .min(1)
      .optional()
      .describe("A named group of the rule's `match.regex`, e.g. `serial` for `(?<serial>…)`."),
    field: z
      .string()
      .min(1)
      .optional()
      .describe(
        'A field the source supplied with the read (MQTT JSON field, CSV column, HTTP body attribute), by the name the input gives it.',
      ),
    sourceDcp: z
      .literal(true)
      .optional()
      .describe(
        'The DCP the source named (MQTT topic level, payload field or CSV column, as the input is configured to take it).',
      ),
    value: z.string().optional().describe('A fixed text.'),
    as: z
      .enum(['text', 'date', 'decimal'])
      .optional()
      .describe(
        'With `ai`: `text` = the value as carried (default); `date` = the resolved date of a date AI (`2028-12-31`); `decimal` = a measure with its decimal point placed (AI 3103 `001234` → `1.234`).',
      ),
    lookup: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Name of a table in `lookups`: the value found is replaced by the table entry (e.g. GTIN → product key).',
      ),
    default: z
      .string()
      .optional()
      .describe('Used when the source has no value, or the lookup table has no entry for it.'),
    required: z
      .literal(true)
      .optional()
      .describe(
        "Only in a rule's `attributes`: a read whose source has no value for this attribute is refused with the reason (`required attribute`), and nothing is sent.",
      ),
    optional: z
      .literal(true)
      .optional()
      .describe(
        "Only in a rule's `attributes`: a read without this attribute is sent without it, with no note and no count (e.g. an expiry date not every label carries).",
      ),
  })
  .strict()
  .superRefine((v, ctx) => {
    if (v.required === true && v.optional === true)
      ctx.addIssue({
        code: 'custom',
        path: ['optional'],
        message: 'an attribute is either `required` or `optional`, not both',
      });
    if (v.required === true && v.default !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['required'],
        message: 'a `required` attribute with a `default` always has a value: drop one of them',
      });
    const given = VALUE_SOURCES.filter((s) => v[s] !== undefined);
    if (given.length !== 1) {
      ctx.addIssue({
        code: 'custom',
        message:
          given.length === 0
            ? `say where the value comes from: one of ${VALUE_SOURCES.join(', ')}`
            : `give only one source, not ${given.join(' and ')}`,
      });
    }
    if (v.as !== undefined && v.ai === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['as'],
        message: '`as` only applies to a value taken from an `ai`',
      });
  })
  .meta({
    id: 'ValueSource',
    description:
      'Where a value comes from: exactly one of `code`, `ai`, `gs1`, `group`, `field`, `sourceDcp`, `value`; optionally translated by `lookup`, with a `default`. Where a fixed text is allowed, it can be written directly instead.',
  });

/** A value: a fixed text, or where it comes from. */
export const valueSchema = z.union([z.string().min(1), valueSourceSchema]);

/** Which reads a rule (or a container's open or close) applies to. All conditions given must hold. */
export const matchSchema = z
  .object({
    regex: z
      .string()
      .min(1)
      .superRefine((source, ctx) => {
        try {
          new RegExp(source, 'u');
        } catch (err) {
          ctx.addIssue({
            code: 'custom',
            message: `not a valid regular expression: ${(err as Error).message}`,
          });
        }
      })
      .optional()
      .describe(
        'Regular expression (JavaScript syntax, Unicode mode) tested against the code without its AIM symbology identifier; anchor it with ^…$ to match the whole code. Named groups `(?<name>…)` can be used as values.',
      ),
    gs1: z
      .boolean()
      .optional()
      .describe(
        'true: the code must be valid GS1 data; false: the code must not be GS1 (a plain code).',
      ),
    ais: z
      .array(aiSchema)
      .min(1)
      .optional()
      .describe('GS1 Application Identifiers the code must all carry (implies gs1: true).'),
  })
  .strict()
  .superRefine((m, ctx) => {
    if (m.gs1 === false && m.ais)
      ctx.addIssue({
        code: 'custom',
        path: ['ais'],
        message: 'a code without GS1 data (gs1: false) carries no AIs',
      });
  })
  .meta({
    id: 'Match',
    description:
      'Conditions on a read; every condition given must hold, none given matches every read.',
  });

export type ValueSource = z.infer<typeof valueSourceSchema>;
export type ValueConfig = z.infer<typeof valueSchema>;
export type MatchConfig = z.infer<typeof matchSchema>;
