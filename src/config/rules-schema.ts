import { z } from 'zod';
import { compileTimeFormat } from '../format/time-format.js';
import { key } from './common-schemas.js';
import { matchSchema, valueSchema, valueSourceSchema } from './value-schemas.js';

export {
  aiSchema,
  matchSchema,
  valueSchema,
  valueSourceSchema,
  VALUE_SOURCES,
  type MatchConfig,
  type ValueConfig,
  type ValueSource,
} from './value-schemas.js';

/**
 * The mapping sections of the configuration: `rules`, `lookups`, `containers`, `timeCheck` and
 * `productCheck`. Part of the one configuration schema (schema.ts); compiled by
 * src/mapping/mapper.ts. What each key means is in its `.describe()`, which docs/configuration.md
 * is generated from.
 */

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
export type RuleConfig = z.infer<typeof ruleSchema>;
export type ContainerConfig = z.infer<typeof containerSchema>;
export type TimeCheckConfig = z.infer<typeof timeCheckSchema>;
export type ProductCheckConfig = z.infer<typeof productCheckSchema>;
