import { z } from 'zod';
import { lookupAi } from '../gs1/index.js';
import { compileTimeFormat } from '../format/time-format.js';
import { key } from './common-schemas.js';

/**
 * The mapping sections of the configuration: `rules`, `lookups`, `containers`, `timeCheck` and
 * `productCheck`. Part of the one configuration schema (schema.ts); compiled by
 * src/mapping/mapper.ts. What each key means is in its `.describe()`, which docs/configuration.md
 * is generated from.
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

const scope = {
  inputs: z
    .array(key)
    .min(1)
    .optional()
    .describe('Ids of the inputs this applies to; omitted = every input (unless `dcps` is given).'),
  dcps: z
    .array(key)
    .min(1)
    .optional()
    .describe(
      'Keys of the DCPs whose inputs this applies to (the `dcp` of the input); omitted = every DCP (unless `inputs` is given).',
    ),
};

const timeFormat = z.string().superRefine((pattern, ctx) => {
  const compiled = compileTimeFormat(pattern);
  if (typeof compiled === 'string') ctx.addIssue({ code: 'custom', message: compiled });
});

/** One rule (`rules[]`): which reads it takes and where each Scan field comes from. */
export const ruleSchema = z
  .object({
    name: key.describe('Name of the rule, unique; shown in rejections and by `scan-gateway try`.'),
    ...scope,
    match: matchSchema.prefault({}).describe('Which reads this rule takes; omitted = every read.'),
    reference: valueSourceSchema
      .default({ code: 'whole' })
      .describe(
        'Where the Scan `reference` comes from. When the code has no value there (the AI or group is absent), the rule does not apply and the next one is tried.',
      ),
    dcp: valueSchema
      .optional()
      .describe(
        "The DCP key: fixed, or from a source (e.g. `{ sourceDcp: true, lookup: stations }`). Default: the DCP the source named, else the input's `dcp`.",
      ),
    productModelKey: valueSchema
      .optional()
      .describe(
        "The product model key: fixed, from a field, or from a lookup (e.g. `{ ai: '01', lookup: gtinToProduct }`). Default: the DCP's `productModelKey`.",
      ),
    supplierKey: valueSchema
      .optional()
      .describe("Supplier key on Goods In scans. Default: the DCP's `supplierKey`."),
    clientKey: valueSchema
      .optional()
      .describe("Client key on Goods Out scans. Default: the DCP's `clientKey`."),
    attributes: z
      .record(z.string().min(1), valueSchema)
      .default({})
      .describe(
        "Scan attributes by key: a fixed text, or a source (`{ ai: '10' }`, `{ group: line }`, `{ field: cellVoltage }`). All values are sent as text; a source without a value adds no attribute.",
      ),
    sourceAttributes: z
      .union([z.boolean(), z.array(z.string().min(1))])
      .default(true)
      .describe(
        'Send the fields the source supplied as attributes: true = all (except those used for dcp, productModelKey, supplierKey, clientKey or parents), false = none, or a list of field names.',
      ),
    parents: z
      .array(valueSchema)
      .default([])
      .describe(
        'Parent references taken from the read (e.g. `{ field: parent }`), added to those the source supplied and to an open container.',
      ),
    requireContainer: z
      .union([z.literal(true), key])
      .optional()
      .describe(
        'Refuse a read this rule maps while no container is open at its station (`true`: any container that applies to the input; a name: that one of `containers`). The refusal is stored with the reason and shown on the station screen ("scan the container first"); nothing is sent.',
      ),
    timeFormat: timeFormat
      .optional()
      .describe(
        "Format of the source's time stamp when it is not ISO 8601, e.g. `dd.MM.yyyy HH:mm:ss` (letters yyyy yy MM M dd d HH H mm ss S… XXX XX X, literal text in single quotes), or `epochSeconds` / `epochMillis`. ISO 8601 is still accepted.",
      ),
  })
  .strict()
  .superRefine((rule, ctx) => {
    for (const field of [
      'reference',
      'dcp',
      'productModelKey',
      'supplierKey',
      'clientKey',
    ] as const) {
      const v = rule[field];
      if (typeof v === 'object' && (v.required !== undefined || v.optional !== undefined))
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message: '`required` and `optional` apply to attributes only',
        });
    }
    if (rule.reference.value !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['reference', 'value'],
        message:
          'a fixed reference would give every scan the same reference; take it from the code, an ai, a group or a field',
      });
    }
  });

/** One container session (`containers[]`): what opens and closes it, and where. */
export const containerSchema = z
  .object({
    name: key.describe('Name of the container session, unique; shown on the health page.'),
    ...scope,
    per: z
      .enum(['input', 'dcp'])
      .default('input')
      .describe(
        "One open parent per input (a scanner) or per DCP (the DCP the source named, else the input's).",
      ),
    open: matchSchema.describe(
      'A read matching this opens the container (e.g. `{ ais: ["00"] }` for an SSCC): the reads after it get it as parent.',
    ),
    reference: valueSourceSchema
      .default({ code: 'whole' })
      .describe('The parent reference taken from the opening read.'),
    close: matchSchema
      .optional()
      .describe(
        'A read matching this closes the container (e.g. an "end of pallet" code); it is counted, not sent. Another opening read also closes it.',
      ),
    idleTimeoutMs: z
      .number()
      .int()
      .min(0)
      .default(600_000)
      .describe('The container closes when no read arrived for this long, in ms; 0 = never.'),
    members: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        'The container holds exactly this many members (e.g. 12 cells in a module): it closes by itself at the Nth, the next member read then needs a new container, and one closed with fewer is incomplete (see `onIncomplete`). The station screen shows "3 of 12". Omitted = no fixed count.',
      ),
    onIncomplete: z
      .enum(['refuse', 'close'])
      .default('close')
      .describe(
        'With `members`: what a new container label (or a closing code) does while the open container is short. `refuse` = the label is refused ("MOD-1 has 3 of 12: finish it first") and the open container stays; only a supervisor closes it short (`scan-gateway containers close`). `close` = the short container is closed and recorded as incomplete (a problem on the page, `scan_gateway_containers{state="incomplete"}`, `trace`), and the new one opens.',
      ),
    closeAfter: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        'An upper limit only: the container closes once this many reads got it as parent; the next member read then needs a new container. Fewer is not incomplete. Use `members` for an exact count. Omitted = no limit.',
      ),
    sendParent: z
      .boolean()
      .default(true)
      .describe(
        'true: the opening read is also mapped by the rules and sent as a scan of its own; false: it only opens the container.',
      ),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.members !== undefined && c.closeAfter !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['closeAfter'],
        message: `members: ${c.members} already closes the container at ${c.members} (and flags one closed short); drop closeAfter, which is only an upper limit`,
      });
  });

/** Named lookup tables (`lookups`): text → text. */
export const lookupsSchema = z
  .record(
    z
      .string()
      .regex(
        /^[A-Za-z][\w-]*$/,
        'a lookup name starts with a letter and holds letters, digits, - and _',
      ),
    z.record(z.string(), z.string()),
  )
  .default({})
  .describe(
    'Named tables that translate a value, e.g. `gtinToProduct: { "09521234543213": PACK-A }` or `stations: { GI-02: GI-02 }`. Keys and values are text (digits are kept as written).',
  );

/** Plausibility of source time stamps (`timeCheck`). */
export const timeCheckSchema = z
  .object({
    maxAheadMs: z
      .number()
      .int()
      .min(0)
      .default(1_800_000)
      .describe(
        'A source time stamp more than this far after the time the gateway received the read is implausible, in ms.',
      ),
    maxBehindMs: z
      .number()
      .int()
      .min(0)
      .default(30 * 24 * 3_600_000)
      .describe(
        'A source time stamp more than this far before the time the gateway received the read is implausible, in ms.',
      ),
    action: z
      .enum(['flag', 'reject'])
      .default('flag')
      .describe(
        'flag = send the scan and record a warning with the read; reject = store the read as a rejection.',
      ),
  })
  .strict();

/** Checks against the upstream product list (`productCheck`, contract §4.1). */
export const productCheckSchema = z
  .object({
    enabled: z
      .boolean()
      .default(true)
      .describe(
        'Fetch the upstream product list at start and periodically, and report mapped product keys it does not hold.',
      ),
    intervalMs: z
      .number()
      .int()
      .min(60_000)
      .default(3_600_000)
      .describe('How often the product list is fetched, in ms.'),
    rejectUnknown: z
      .boolean()
      .default(false)
      .describe(
        'Store a read whose product model key is not in the last fetched product list as a rejection instead of sending it.',
      ),
  })
  .strict();

/** Types of the mapping sections, inferred from the schemas. */
export type ValueSource = z.infer<typeof valueSourceSchema>;
export type ValueConfig = z.infer<typeof valueSchema>;
export type MatchConfig = z.infer<typeof matchSchema>;
export type RuleConfig = z.infer<typeof ruleSchema>;
export type ContainerConfig = z.infer<typeof containerSchema>;
export type TimeCheckConfig = z.infer<typeof timeCheckSchema>;
export type ProductCheckConfig = z.infer<typeof productCheckSchema>;
