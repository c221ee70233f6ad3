import { z } from 'zod';
import { key } from './common-schemas.js';
import { crossCheck } from './cross-check.js';
import { inputEntrySchema } from './input-kind.js';
import { bufferSchema, httpSchema, sandboxSchema } from './local-schemas.js';
import { haSchema } from './ha-schema.js';
import {
  containerSchema,
  lookupsSchema,
  productCheckSchema,
  ruleSchema,
  timeCheckSchema,
} from './rules-schema.js';
import { deliverySchema, upstreamSchema } from './upstream-schemas.js';

/**
 * The configuration plant IT writes, as one zod schema: the source of the TypeScript types, the
 * defaults and the documentation. Every object is strict so a typo is an error, not a silent default.
 */

export const siteSchema = z
  .object({
    id: key.describe('Identifier of this site, shown on the health page and in logs.'),
    timezone: z
      .string()
      .refine(isIanaZone, 'must be an IANA time zone such as Europe/Berlin')
      .describe(
        'IANA time zone in which scan time stamps are written (the wire format has no zone).',
      ),
    shifts: z
      .array(
        z
          .object({
            name: z
              .string()
              .min(1)
              .max(40)
              .describe('Name of the shift, shown on the station screen.'),
            start: z
              .string()
              .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be a time of day as HH:MM, e.g. "06:00"')
              .describe(
                'When the shift starts, as HH:MM in the site time zone; it ends when the next shift starts.',
              ),
          })
          .strict(),
      )
      .min(1)
      .max(24)
      .default([
        { name: 'early', start: '06:00' },
        { name: 'late', start: '14:00' },
        { name: 'night', start: '22:00' },
      ])
      .superRefine((shifts, ctx) => {
        const seen = new Set<string>();
        shifts.forEach((s, i) => {
          if (seen.has(s.start))
            ctx.addIssue({
              code: 'custom',
              path: [i, 'start'],
              message: `two shifts start at ${s.start}`,
            });
          seen.add(s.start);
        });
      })
      .describe(
        'The shifts of the site (for the station screen): each starts at its `start` (site time zone) and runs until the next one starts; the screen counts the reads of the current shift.',
      ),
  })
  .strict();

// The sections with modules of their own, exported here too: this module stays the one import.
export {
  STATUS_EVENTS_FETCH_WAIT_MS,
  STATUS_EVENTS_MIN_STALE_MS,
  statusEventsSchema,
  statusEventTopic,
  sftpSchema,
  upstreamSchema,
  deliverySchema,
  type StatusEventsConfig,
} from './upstream-schemas.js';
export {
  bufferSchema,
  httpLimitsSchema,
  DEFAULT_HTTP_LIMITS,
  httpSchema,
  httpTlsSchema,
  DEFAULT_SANDBOX_KAFKA_LISTEN,
  sandboxSchema,
  type HttpLimitsConfig,
  type HttpTlsConfig,
} from './local-schemas.js';

export const dcpKinds = ['goodsIn', 'startOfProcess', 'endOfProcess', 'goodsOut'] as const;

export const dcpSchema = z
  .object({
    key: key.describe('DCP key as known to the upstream service.'),
    kind: z.enum(dcpKinds).describe('Goods In needs supplierKey; Goods Out needs clientKey.'),
    productModelKey: key
      .optional()
      .describe(
        'Product model key sent with the scans of this DCP, unless a rule takes it from the read; a scan without one is rejected.',
      ),
    supplierKey: key.optional().describe('Supplier key, sent on Goods In scans.'),
    clientKey: key.optional().describe('Client key, sent on Goods Out scans.'),
    duplicateWindowMs: z
      .number()
      .int()
      .min(0)
      .default(2000)
      .describe(
        'The same reference at this DCP within this window is a duplicate read, not sent again; 0 = off.',
      ),
    attributes: z
      .record(z.string().min(1), z.string())
      .default({})
      .describe(
        'Fixed attributes sent with every scan of this DCP (a rule or the source can override one by its key).',
      ),
  })
  .strict()
  .superRefine((dcp, ctx) => {
    if (dcp.kind === 'goodsIn' && !dcp.supplierKey) {
      ctx.addIssue({
        code: 'custom',
        path: ['supplierKey'],
        message: 'a goodsIn DCP needs supplierKey',
      });
    }
    if (dcp.kind === 'goodsOut' && !dcp.clientKey) {
      ctx.addIssue({
        code: 'custom',
        path: ['clientKey'],
        message: 'a goodsOut DCP needs clientKey',
      });
    }
    if (dcp.kind !== 'goodsIn' && dcp.supplierKey) {
      ctx.addIssue({
        code: 'custom',
        path: ['supplierKey'],
        message: `supplierKey is only for goodsIn DCPs, this one is ${dcp.kind}`,
      });
    }
    if (dcp.kind !== 'goodsOut' && dcp.clientKey) {
      ctx.addIssue({
        code: 'custom',
        path: ['clientKey'],
        message: `clientKey is only for goodsOut DCPs, this one is ${dcp.kind}`,
      });
    }
  });

export const configSchema = z
  .object({
    site: siteSchema.describe(
      "This gateway's site: its name and the time zone scan time stamps are written in.",
    ),
    upstream: upstreamSchema.describe(
      'The Battery Product and Traceability Scan Service and how to reach it.',
    ),
    buffer: bufferSchema
      .prefault({})
      .describe(
        'The durable SQLite buffer (outbox) every read is committed to before it is acknowledged.',
      ),
    delivery: deliverySchema
      .prefault({})
      .describe('How buffered scans are batched, uploaded and followed upstream.'),
    http: httpSchema
      .prefault({})
      .describe('The local HTTP server: health page, status API, metrics, HTTP ingest.'),
    sandbox: sandboxSchema
      .prefault({})
      .describe('The embedded emulator of the upstream service, for demos.'),
    log: z
      .object({
        level: z
          .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace'])
          .default('info')
          .describe('Least severe level written.'),
        format: z
          .enum(['auto', 'json', 'pretty'])
          .default('auto')
          .describe(
            'json = one JSON object per line (journald); pretty = for people; auto = pretty on a terminal, else json.',
          ),
      })
      .strict()
      .prefault({})
      .describe('Logs go to stdout; secrets and tokens are always redacted.'),
    dcps: z.array(dcpSchema).min(1).describe('Data collection points of this site.'),
    // Built from the registered input kinds (src/inputs/registry.ts) when first parsed.
    inputs: z.array(z.lazy(inputEntrySchema)).describe('Where reads come from.'),
    lookups: lookupsSchema,
    rules: z
      .array(ruleSchema)
      .default([])
      .describe(
        'How reads become Scans, tried in order; the first rule whose `match` holds (and whose reference the read has) maps the read. An input that no rule applies to keeps the default mapping (reference = the code exactly as read); a read of an input with rules that none matches is rejected.',
      ),
    containers: z
      .array(containerSchema)
      .default([])
      .describe(
        'Container sessions: a read matching `open` (a pallet SSCC, a tray) becomes the parent of the reads after it at the same input or DCP.',
      ),
    timeCheck: timeCheckSchema.prefault({}).describe('Plausibility of source time stamps.'),
    productCheck: productCheckSchema
      .prefault({})
      .describe('Checks of mapped product model keys against the upstream product list.'),
    ha: haSchema
      .optional()
      .describe(
        'High availability: two gateways for one line, the leader elected through an etcd lease; only the leader takes reads (docs/high-availability.md). Not set: this gateway runs alone.',
      ),
  })
  .strict()
  // Runs even when parts are invalid, so one `config check` reports every mistake at once.
  .superRefine(crossCheck, { when: () => true });

export type GatewayConfig = z.infer<typeof configSchema>;
export type DcpConfig = z.infer<typeof dcpSchema>;
export type { InputConfig } from './input-kind.js';
export type DeliveryConfig = z.infer<typeof deliverySchema>;
export type UpstreamConfig = z.infer<typeof upstreamSchema>;
export type {
  RuleConfig,
  ContainerConfig,
  MatchConfig,
  ValueConfig,
  ValueSource,
  TimeCheckConfig,
  ProductCheckConfig,
} from './rules-schema.js';

/** ICU's canonical zone names, read on first use (about 1 ms). */
let canonicalZones: ReadonlySet<string> | undefined;

/**
 * Whether `zone` names a time zone ICU knows. A canonical name (Europe/Berlin) is looked up in the
 * list of them: the first `Intl.DateTimeFormat` of a process costs 12 to 18 ms (ICU's locale data),
 * paid here before ready otherwise. Aliases and fixed zones (UTC,
 * US/Eastern, Etc/GMT-1) are not in that list: those are still checked by building a formatter.
 */
function isIanaZone(zone: string): boolean {
  canonicalZones ??= new Set(Intl.supportedValuesOf('timeZone'));
  if (canonicalZones.has(zone)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}
