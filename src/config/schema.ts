import { z } from 'zod';

/**
 * The configuration plant IT writes, as one zod schema: the source of the TypeScript types, the
 * defaults and the documentation. Every object is strict so a typo is an error, not a silent default.
 */

const key = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[^\s]+$/, 'must not contain white space');

const listenAddress = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/, 'must be host:port, e.g. 127.0.0.1:8080');

export const siteSchema = z
  .object({
    id: key.describe('Identifier of this site, shown on the health page and in logs.'),
    timezone: z
      .string()
      .refine(isIanaZone, 'must be an IANA time zone such as Europe/Berlin')
      .describe('IANA time zone in which scan time stamps are written (the wire format has no zone).'),
  })
  .strict();

export const upstreamSchema = z
  .object({
    baseUrl: z.url().describe('Base address of the Battery Product and Traceability Scan Service.'),
    authUrl: z.url().describe('Base address of the OAuth 2.0 token endpoint; `/oauth2/token` is appended.'),
    clientId: z.string().min(1).describe('OAuth 2.0 client id issued by the service operator.'),
    clientSecretFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'File holding the client secret. Alternatives: the environment variable SCAN_GATEWAY_CLIENT_SECRET, or a systemd credential named client-secret. A literal secret in this file is refused.',
      ),
    caFile: z.string().optional().describe('PEM bundle of extra certificate authorities (a site proxy CA).'),
    proxyUrl: z.url().optional().describe('HTTP(S) proxy through which the service is reached.'),
    requestTimeoutMs: z.number().int().positive().default(30_000).describe('Timeout for one HTTP exchange, in ms.'),
  })
  .strict();

export const bufferSchema = z
  .object({
    path: z.string().min(1).default('var/buffer.db').describe('SQLite file of the durable buffer (outbox).'),
  })
  .strict();

export const deliverySchema = z
  .object({
    mode: z
      .enum(['direct', 'presigned', 'auto'])
      .default('direct')
      .describe('direct = POST each batch; presigned = pre-signed URL then PUT; auto = direct for small batches.'),
    maxBatchScans: z.number().int().min(1).max(1_000_000).default(5000).describe('Most scans in one batch.'),
    maxBatchDelayMs: z
      .number()
      .int()
      .min(0)
      .default(1000)
      .describe('How long the oldest pending scan may wait for a batch to fill, in ms.'),
    presignedMaxScans: z
      .number()
      .int()
      .min(1)
      .default(100_000)
      .describe('Most scans in one pre-signed batch (presigned mode, and auto mode with a backlog).'),
    presignedMaxBytes: z
      .number()
      .int()
      .min(1024)
      .default(64 * 1024 * 1024)
      .describe('Largest pre-signed batch body, in bytes.'),
    retryBaseMs: z.number().int().positive().default(500).describe('First retry delay (full jitter), in ms.'),
    retryMaxMs: z.number().int().positive().default(60_000).describe('Largest retry delay, in ms.'),
    statusPollMs: z.number().int().positive().default(1000).describe('First status poll interval, in ms; it grows.'),
    statusPollMaxMs: z.number().int().positive().default(30_000).describe('Largest status poll interval, in ms.'),
    notFoundGraceMs: z
      .number()
      .int()
      .positive()
      .default(120_000)
      .describe('How long an uploaded batch may answer NotFound before it is sent again, in ms.'),
  })
  .strict();

export const httpSchema = z
  .object({
    listen: listenAddress
      .default('127.0.0.1:8080')
      .describe('Address of the local health page and API. Loopback unless you mean to expose it.'),
  })
  .strict();

export const sandboxSchema = z
  .object({
    enabled: z.boolean().default(false).describe('Start the built-in upstream sandbox inside the gateway (demo only).'),
    listen: listenAddress.default('127.0.0.1:8090').describe('Address of the embedded sandbox.'),
  })
  .strict();

export const dcpKinds = ['goodsIn', 'startOfProcess', 'endOfProcess', 'goodsOut'] as const;

export const dcpSchema = z
  .object({
    key: key.describe('DCP key as known to the upstream service.'),
    kind: z.enum(dcpKinds).describe('Goods In needs supplierKey; Goods Out needs clientKey.'),
    productModelKey: key.describe('Product model key sent with every scan of this DCP.'),
    supplierKey: key.optional().describe('Supplier key, sent on Goods In scans.'),
    clientKey: key.optional().describe('Client key, sent on Goods Out scans.'),
    duplicateWindowMs: z
      .number()
      .int()
      .min(0)
      .default(2000)
      .describe('The same reference at this DCP within this window is a duplicate read, not sent again; 0 = off.'),
  })
  .strict()
  .superRefine((dcp, ctx) => {
    if (dcp.kind === 'goodsIn' && !dcp.supplierKey) {
      ctx.addIssue({ code: 'custom', path: ['supplierKey'], message: 'a goodsIn DCP needs supplierKey' });
    }
    if (dcp.kind === 'goodsOut' && !dcp.clientKey) {
      ctx.addIssue({ code: 'custom', path: ['clientKey'], message: 'a goodsOut DCP needs clientKey' });
    }
    if (dcp.kind !== 'goodsIn' && dcp.supplierKey) {
      ctx.addIssue({ code: 'custom', path: ['supplierKey'], message: `supplierKey is only for goodsIn DCPs, this one is ${dcp.kind}` });
    }
    if (dcp.kind !== 'goodsOut' && dcp.clientKey) {
      ctx.addIssue({ code: 'custom', path: ['clientKey'], message: `clientKey is only for goodsOut DCPs, this one is ${dcp.kind}` });
    }
  });

const inputBase = {
  id: key.describe('Identifier of this input, unique in the file.'),
  dcp: key.describe('Key of the DCP (from `dcps`) that reads of this input belong to.'),
  noReadStrings: z
    .array(z.string())
    .default(['NOREAD', 'ERROR', 'NR', 'NoRead'])
    .describe('Texts the scanner sends when it could not read a code: counted, never sent.'),
};

export const filesInputSchema = z
  .object({
    ...inputBase,
    type: z.literal('files'),
    dir: z.string().min(1).describe('Folder to watch; `processed/` and `failed/` are created inside it.'),
    format: z.enum(['lines', 'csv']).default('lines').describe('lines = one barcode per line; csv = header row, then rows.'),
    barcodeColumn: z.string().default('barcode').describe('csv: header of the column holding the barcode.'),
    timeColumn: z.string().optional().describe('csv: header of the column holding the read time stamp.'),
    delimiter: z.string().length(1).default(',').describe('csv: field delimiter.'),
    stableMs: z
      .number()
      .int()
      .min(0)
      .default(500)
      .describe('A file is read once its size has not changed for this long, in ms.'),
    usePolling: z.boolean().default(false).describe('Poll instead of inotify (needed on SMB/NFS shares).'),
  })
  .strict();

export const serialInputSchema = z
  .object({
    ...inputBase,
    type: z.literal('serial'),
    path: z.string().min(1).describe('Device path; prefer /dev/serial/by-id/… which survives re-plugging.'),
    baudRate: z.number().int().positive().default(9600),
    dataBits: z.union([z.literal(5), z.literal(6), z.literal(7), z.literal(8)]).default(8),
    stopBits: z.union([z.literal(1), z.literal(1.5), z.literal(2)]).default(1),
    parity: z.enum(['none', 'even', 'odd', 'mark', 'space']).default('none'),
    terminator: z
      .string()
      .min(1)
      .default('\r')
      .describe('Byte sequence that ends a read; YAML escapes such as "\\r\\n" work in double quotes.'),
    maxReadLength: z.number().int().positive().default(4096).describe('Longest read in bytes; longer is rejected.'),
    reconnectMs: z.number().int().positive().default(2000).describe('Delay before reopening a lost device, in ms.'),
  })
  .strict();

export const inputSchema = z.discriminatedUnion('type', [filesInputSchema, serialInputSchema]);

export const configSchema = z
  .object({
    site: siteSchema,
    upstream: upstreamSchema,
    buffer: bufferSchema.default({ path: 'var/buffer.db' }),
    delivery: deliverySchema.prefault({}),
    http: httpSchema.prefault({}),
    sandbox: sandboxSchema.prefault({}),
    log: z
      .object({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace']).default('info') })
      .strict()
      .prefault({}),
    dcps: z.array(dcpSchema).min(1).describe('Data collection points of this site.'),
    inputs: z.array(inputSchema).describe('Where reads come from.'),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    const dcpKeys = new Set<string>();
    cfg.dcps.forEach((d, i) => {
      if (dcpKeys.has(d.key)) ctx.addIssue({ code: 'custom', path: ['dcps', i, 'key'], message: `duplicate DCP key ${d.key}` });
      dcpKeys.add(d.key);
    });
    const ids = new Set<string>();
    cfg.inputs.forEach((input, i) => {
      if (ids.has(input.id)) ctx.addIssue({ code: 'custom', path: ['inputs', i, 'id'], message: `duplicate input id ${input.id}` });
      ids.add(input.id);
      if (!dcpKeys.has(input.dcp)) {
        ctx.addIssue({
          code: 'custom',
          path: ['inputs', i, 'dcp'],
          message: `unknown DCP "${input.dcp}"; known: ${[...dcpKeys].join(', ')}`,
        });
      }
    });
  });

export type GatewayConfig = z.infer<typeof configSchema>;
export type DcpConfig = z.infer<typeof dcpSchema>;
export type InputConfig = z.infer<typeof inputSchema>;
export type FilesInputConfig = z.infer<typeof filesInputSchema>;
export type SerialInputConfig = z.infer<typeof serialInputSchema>;
export type DeliveryConfig = z.infer<typeof deliverySchema>;

function isIanaZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}
