import { z } from 'zod';
import { hasUrlCredentials, insecureUrlProblem } from './url-policy.js';
import { key } from './common-schemas.js';
import { crossCheck } from './cross-check.js';
import { inputSchema } from './input-schemas.js';
import { containerSchema, lookupsSchema, productCheckSchema, ruleSchema, timeCheckSchema } from './rules-schema.js';

/**
 * The configuration plant IT writes, as one zod schema: the source of the TypeScript types, the
 * defaults and the documentation. Every object is strict so a typo is an error, not a silent default.
 */

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
    shifts: z
      .array(
        z
          .object({
            name: z.string().min(1).max(40).describe('Name of the shift, shown on the station screen.'),
            start: z
              .string()
              .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be a time of day as HH:MM, e.g. "06:00"')
              .describe('When the shift starts, as HH:MM in the site time zone; it ends when the next shift starts.'),
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
          if (seen.has(s.start)) ctx.addIssue({ code: 'custom', path: [i, 'start'], message: `two shifts start at ${s.start}` });
          seen.add(s.start);
        });
      })
      .describe('The shifts of the site (for the station screen): each starts at its `start` (site time zone) and runs until the next one starts; the screen counts the reads of the current shift.'),
  })
  .strict();

/** How long one fetch of status events waits at the broker for a new one, ms: also how often a quiet topic is read. */
export const STATUS_EVENTS_FETCH_WAIT_MS = 2_000;
/** The least `statusEvents.staleAfterMs`: two fetch waits of a quiet topic and a second for the answer, ms. */
export const STATUS_EVENTS_MIN_STALE_MS = 2 * STATUS_EVENTS_FETCH_WAIT_MS + 1_000;

/**
 * Status events (contract §6): the status topic read over SASL_SSL with SCRAM-SHA-512,
 * username `upstream.clientId`, password the client secret (src/config/secrets.ts). See
 * docs/upstream.md "Status events".
 */
export const statusEventsSchema = z
  .object({
    enabled: z.boolean().default(false).describe('Read batch outcomes from the status topic (contract §6); polling slows down while events flow and takes over when they do not.'),
    bootstrapServers: z
      .array(z.string().regex(/^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/, 'must be host:port, e.g. kafka-1.example.com:9093'))
      .default([])
      .describe('Kafka bootstrap servers as host:port, from the service operator ({kafka_bootstrap_servers}). Required when enabled.'),
    environment: z.string().regex(/^[A-Za-z0-9._-]*$/, 'letters, digits, . _ - only').default('').describe('The environment name in the topic ({env}), from the service operator. Required when enabled unless topic is set.'),
    clientInternalName: z
      .string()
      .regex(/^[A-Za-z0-9._-]*$/, 'letters, digits, . _ - only')
      .optional()
      .describe('The client internal name in the topic ({client_internal_name}), issued with the client id; default upstream.clientId.'),
    topic: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,249}$/, 'must be a Kafka topic name: letters, digits, . _ - (at most 249)')
      .optional()
      .describe('The status topic; default <environment>-<clientInternalName>-status-event.'),
    caFile: z
      .string()
      .min(1)
      .optional()
      .describe('PEM bundle of extra certificate authorities for the brokers\' TLS certificates (added to the default ones). Verification is always on.'),
    trustSandboxCa: z
      .boolean()
      .default(false)
      .describe('Demo only: trust the certificate authority of the embedded sandbox (sandbox.enabled) as well, taken from it in the process.'),
    safetyPollMs: z
      .number()
      .int()
      .positive()
      .default(600_000)
      .describe('While events flow, each uploaded batch is still polled this often (ms), in case an event never comes.'),
    maxLagEvents: z
      .number()
      .int()
      .min(0)
      .default(1000)
      .describe('When the consumer is more events than this behind the end of the topic, polling takes over at its normal pace until it caught up.'),
    staleAfterMs: z
      .number()
      .int()
      // A fetch of a quiet topic returns only after the consumer's wait: a shorter staleness
      // flipped a healthy, quiet feed to `lagging` between reads.
      .min(STATUS_EVENTS_MIN_STALE_MS, {
        error: `must be at least ${STATUS_EVENTS_MIN_STALE_MS} ms: a read of a quiet topic returns only every ${STATUS_EVENTS_FETCH_WAIT_MS / 1000} s (the fetch wait), so a shorter value would count a healthy feed as stale`,
      })
      .default(30_000)
      .describe(`When no read of the topic succeeded for this long (ms, at least ${STATUS_EVENTS_MIN_STALE_MS}: a read of a quiet topic returns every ${STATUS_EVENTS_FETCH_WAIT_MS / 1000} s), the consumer counts as behind and polling takes over at its normal pace.`),
  })
  .strict()
  .superRefine((e, ctx) => {
    if (!e.enabled) return;
    if (e.bootstrapServers.length === 0) ctx.addIssue({ code: 'custom', path: ['bootstrapServers'], message: 'status events need at least one bootstrap server (host:port)' });
    if (e.topic === undefined && e.environment === '') ctx.addIssue({ code: 'custom', path: ['environment'], message: 'status events need the environment name of the topic (or topic itself)' });
  });

export type StatusEventsConfig = z.infer<typeof statusEventsSchema>;

/** The status topic of `upstream` (contract §6): `topic`, else `{env}-{client_internal_name}-status-event`. */
export function statusEventTopic(upstream: { clientId: string; statusEvents: Pick<StatusEventsConfig, 'topic' | 'environment' | 'clientInternalName'> }): string {
  const e = upstream.statusEvents;
  return e.topic ?? `${e.environment}-${e.clientInternalName ?? upstream.clientId}-status-event`;
}

/**
 * The SFTP route. The contract shows no SFTP details (§4.7): folder, file name and what
 * the service does with a file are assumptions to confirm with the service operator (docs/delivery.md).
 */
export const sftpSchema = z
  .object({
    host: z.string().min(1).describe('Host name or address of the SFTP server.'),
    port: z.number().int().min(1).max(65535).default(22).describe('TCP port of the SFTP server.'),
    username: z.string().min(1).optional().describe('SSH user name; default upstream.clientId.'),
    privateKeyFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'File holding the SSH private key (OpenSSH or PEM format, unencrypted). Without it, a password is used: the environment variable SCAN_GATEWAY_SFTP_PASSWORD, a systemd credential named sftp-password, or passwordFile. Never in this file.',
      ),
    passwordFile: z.string().min(1).optional().describe('File holding the SSH password, when no privateKeyFile is given (see privateKeyFile for the alternatives).'),
    hostKey: z
      .string()
      .regex(/^SHA256:[A-Za-z0-9+/]{43}=?$/, 'must be the SHA256 fingerprint as `ssh-keygen -lf` prints it, e.g. SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8')
      .describe('The server\'s host key fingerprint as `ssh-keygen -lf` prints it (SHA256:…). Required: a server showing another key is refused (no trust on first use).'),
    remoteDir: z.string().min(1).default('.').describe('Folder on the server the batch files are written to (relative to the login folder, or absolute).'),
    fileName: z
      .string()
      .min(1)
      .regex(/^[^/\\]+$/, 'must be a file name without folders')
      .refine((t) => t.includes('{batchId}'), 'must contain {batchId}, so that each batch has its own name')
      .refine((t) => !t.endsWith('.part'), 'must not end in .part (the suffix of a file being written)')
      .default('{siteId}-{batchId}-{sha256:12}.json')
      .describe('Template of a batch file\'s name: {siteId}, {batchId}, {sha256:N} (the first N hex digits of the body\'s SHA-256), {sha256}. Fixed per batch, so a batch exists on the server at most once.'),
    connectTimeoutMs: z.number().int().min(1000).default(20_000).describe('Deadline of the SSH connection and login, in ms.'),
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
    proxyUrl: z
      .url()
      .optional()
      .describe('HTTP(S) proxy through which the service is reached, without user:password@ (see proxyCredentialsFile).'),
    proxyCredentialsFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'File holding the proxy credentials as user:password (sent as Basic). Alternative: the environment variable SCAN_GATEWAY_PROXY_CREDENTIALS. Credentials in proxyUrl are refused.',
      ),
    requestTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(30_000)
      .describe('Deadline of one whole HTTP exchange (connect, headers and the complete answer), in ms; uploads get more, see minUploadBytesPerSec.'),
    minUploadBytesPerSec: z
      .number()
      .int()
      .positive()
      .default(32 * 1024)
      .describe('Slowest upload rate still allowed to finish: a request with a body gets requestTimeoutMs plus its size at this rate.'),
    maxAnswerBytes: z
      .number()
      .int()
      .min(1024)
      .default(1024 * 1024)
      .describe('Most bytes read of any upstream answer (token, upload, status, errors); a larger 2xx answer is an error.'),
    maxProductListBytes: z
      .number()
      .int()
      .min(1024)
      .default(16 * 1024 * 1024)
      .describe('Most bytes read of the product list answer (contract §4.1 has no limit; 16 MiB hold about 150,000 products).'),
    allowInsecureHttp: z
      .boolean()
      .default(false)
      .describe('Lab only: allow plain http to a baseUrl/authUrl that is not loopback. The secret and the token then cross the network in clear; logged as a warning at every start.'),
    statusEvents: statusEventsSchema.prefault({}).describe('Status events on the service\'s Kafka topic (contract §6): batch outcomes within a second, polling as the fallback.'),
    sftp: sftpSchema.optional().describe('The SFTP file transfer route for batches (contract §4.7; docs/delivery.md, "SFTP"). Needed by delivery.mode sftp and delivery.largeBatchRoute sftp.'),
  })
  .strict()
  .superRefine((u, ctx) => {
    // The client secret (§5) and the bearer token must not cross a network in clear.
    if (!u.allowInsecureHttp) {
      for (const key of ['baseUrl', 'authUrl'] as const) {
        const problem = insecureUrlProblem(u[key]);
        if (problem) ctx.addIssue({ code: 'custom', path: [key], message: problem });
      }
    }
    if (u.proxyUrl !== undefined && hasUrlCredentials(u.proxyUrl)) {
      ctx.addIssue({
        code: 'custom',
        path: ['proxyUrl'],
        message: 'must not carry user:password@ (the file is not a secret store); put them in the file named by upstream.proxyCredentialsFile or in SCAN_GATEWAY_PROXY_CREDENTIALS',
      });
    }
  });

export const bufferSchema = z
  .object({
    path: z.string().min(1).default('var/buffer.db').describe('SQLite file of the durable buffer (outbox).'),
    maxPendingScans: z
      .number()
      .int()
      .positive()
      .default(2_000_000)
      .describe('Quota: most undelivered scans. Near it, inputs that can wait pause; at it, new scans are refused (docs/delivery.md).'),
    maxBytes: z
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        'Quota: most bytes of undelivered scans (their JSON). Not set: derived from the buffer\'s file system at start and every second, what it can hold (the buffer\'s files and the free space, less the 4 MiB reserve, the low-space mark and 4 MiB for the write-ahead log, at 3.5 bytes on disk per byte of JSON), at least 1 MiB, at most 2 GiB, so the quota is reached before the disk is (docs/operations.md §9). Set larger than the disk holds, it is warned about (config check, page).',
      ),
    pauseAtRatio: z
      .number()
      .gt(0)
      .max(1)
      .default(0.9)
      .describe('Share of either quota at which inputs that can wait (files, MQTT) are paused.'),
    resumeAtRatio: z
      .number()
      .min(0)
      .lt(1)
      .default(0.8)
      .describe('Share of the quota below which paused inputs resume; below pauseAtRatio so they do not flap.'),
    retentionDays: z
      .number()
      .min(0)
      .default(30)
      .describe('Audit period: delivered scans are kept this many days with their requestId and final state, then pruned.'),
  })
  .strict()
  .refine((b) => b.resumeAtRatio < b.pauseAtRatio, { message: 'resumeAtRatio must be below pauseAtRatio', path: ['resumeAtRatio'] });

export const deliverySchema = z
  .object({
    mode: z
      .enum(['direct', 'presigned', 'sftp', 'auto'])
      .default('direct')
      .describe('direct = POST each batch; presigned = pre-signed URL then PUT; sftp = every batch as a file over SFTP (upstream.sftp); auto = direct for small batches, largeBatchRoute for a backlog.'),
    largeBatchRoute: z
      .enum(['presigned', 'sftp'])
      .default('presigned')
      .describe('Route of the large batches of auto mode (a backlog, or a scan too large for a direct upload): presigned, or sftp (upstream.sftp).'),
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
      .default(10_000)
      .describe('Most scans in one pre-signed batch (presigned mode, and auto mode with a backlog). The body is streamed from the buffer as it is sent, never built whole in memory.'),
    presignedMaxBytes: z
      .number()
      .int()
      .min(1024)
      .default(64 * 1024 * 1024)
      .describe('Largest pre-signed batch body, in bytes.'),
    uploadConcurrency: z
      .number()
      .int()
      .min(1)
      .max(16)
      .default(3)
      .describe(
        'Most batch uploads in flight at once (direct POSTs and pre-signed PUTs; SFTP batches go one at a time). Each batch keeps its own state and guarantees; after a failure one upload at a time is tried until one succeeds. 1 sends one batch at a time.',
      ),
    sftpMaxScans: z.number().int().min(1).default(500_000).describe('Most scans in one SFTP batch.'),
    sftpMaxBytes: z
      .number()
      .int()
      .min(1024)
      .default(50 * 1024 * 1024)
      .describe('Largest SFTP batch file, in bytes. The body is streamed from the buffer, never built whole in memory.'),
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

/**
 * Timeouts and connection cap of a local HTTP listener (health/ingest server, sandbox). Defaults
 * ({@link DEFAULT_HTTP_LIMITS}) are far above what a page, a probe, a scraper or an MES posting
 * reads needs, and far below what lets idle or half-open connections pile up.
 */
export const httpLimitsSchema = z
  .object({
    maxConnections: z.number().int().min(1).max(100_000).default(256).describe('Most connections open at once; a connection past it is closed at once, before a byte is read.'),
    headersTimeoutMs: z
      .number()
      .int()
      .min(100)
      .default(10_000)
      .describe('Longest time from a connection (or the end of the previous request) to a complete request head, in ms; a slower or silent client is disconnected (408 or closed).'),
    requestTimeoutMs: z
      .number()
      .int()
      .min(100)
      .default(30_000)
      .describe('Longest time to receive a whole request (head and body), in ms; at least headersTimeoutMs.'),
    keepAliveTimeoutMs: z.number().int().min(100).default(5_000).describe('How long an idle keep-alive connection stays open after an answer, in ms.'),
    idleTimeoutMs: z
      .number()
      .int()
      .min(100)
      .default(60_000)
      .describe('A connection with no traffic in either direction for this long is closed, in ms (also bounds a slow answer being read).'),
    maxRequestsPerSocket: z.number().int().min(0).default(1000).describe('Most requests on one keep-alive connection before it is closed; 0 = no limit.'),
  })
  .strict()
  .refine((l) => l.requestTimeoutMs >= l.headersTimeoutMs, { message: 'requestTimeoutMs must be at least headersTimeoutMs', path: ['requestTimeoutMs'] });

export type HttpLimitsConfig = z.infer<typeof httpLimitsSchema>;

/** The defaults of {@link httpLimitsSchema}, for listeners without a configuration (the sandbox command). */
export const DEFAULT_HTTP_LIMITS: HttpLimitsConfig = httpLimitsSchema.parse({});

export const httpSchema = z
  .object({
    listen: listenAddress
      .default('127.0.0.1:8080')
      .describe('Address of the local health page and API. Loopback unless you mean to expose it.'),
    adminTokenFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'File holding the bearer token for admin actions (retry, pause, resume, replay). Alternatives: the environment variable SCAN_GATEWAY_ADMIN_TOKEN, or a systemd credential named admin-token. Without a token the actions are off.',
      ),
    readTokenFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'File holding the read token that guards the health page, /api/v1/status and /metrics (Bearer, or HTTP Basic with the token as password). Alternatives: the environment variable SCAN_GATEWAY_READ_TOKEN, or a systemd credential named read-token. Without one these are open; a warning is logged when listen is not loopback.',
      ),
    allowedHosts: z
      .array(z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(:\d{1,5})?$/, 'must be a host name or address, optionally with :port, e.g. gateway-07.plant.local:8080'))
      .default([])
      .describe(
        'Host header values accepted besides localhost, 127.0.0.1, [::1] and the listen host (and, when listen is 0.0.0.0 or [::], this machine\'s host name and addresses). An entry without a port matches any port. Others are answered 421 (DNS rebinding defence).',
      ),
    limits: httpLimitsSchema.prefault({}).describe('Timeouts and connection cap of the local HTTP server; the embedded sandbox uses the same defaults.'),
  })
  .strict();

/** Default address of the embedded sandbox's Kafka endpoint. */
export const DEFAULT_SANDBOX_KAFKA_LISTEN = '127.0.0.1:9093';

export const sandboxSchema = z
  .object({
    enabled: z.boolean().default(false).describe('Start the built-in upstream sandbox inside the gateway (demo only).'),
    listen: listenAddress.default('127.0.0.1:8090').describe('Address of the embedded sandbox.'),
    kafka: z
      .object({
        listen: listenAddress
          .default(DEFAULT_SANDBOX_KAFKA_LISTEN)
          .describe('Address of the embedded sandbox\'s Kafka endpoint: status events over SASL_SSL with SCRAM-SHA-512, its own CA (GET /_sandbox/kafka hands it out).'),
      })
      .strict()
      .prefault({})
      .describe('The status-event endpoint of the embedded sandbox (contract §6), see docs/upstream.md.'),
  })
  .strict();

export const dcpKinds = ['goodsIn', 'startOfProcess', 'endOfProcess', 'goodsOut'] as const;

export const dcpSchema = z
  .object({
    key: key.describe('DCP key as known to the upstream service.'),
    kind: z.enum(dcpKinds).describe('Goods In needs supplierKey; Goods Out needs clientKey.'),
    productModelKey: key
      .optional()
      .describe('Product model key sent with the scans of this DCP, unless a rule takes it from the read; a scan without one is rejected.'),
    supplierKey: key.optional().describe('Supplier key, sent on Goods In scans.'),
    clientKey: key.optional().describe('Client key, sent on Goods Out scans.'),
    duplicateWindowMs: z
      .number()
      .int()
      .min(0)
      .default(2000)
      .describe('The same reference at this DCP within this window is a duplicate read, not sent again; 0 = off.'),
    attributes: z
      .record(z.string().min(1), z.string())
      .default({})
      .describe('Fixed attributes sent with every scan of this DCP (a rule or the source can override one by its key).'),
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

export { inputSchema, filesInputSchema, serialInputSchema } from './input-schemas.js';

export const configSchema = z
  .object({
    site: siteSchema.describe('This gateway\'s site: its name and the time zone scan time stamps are written in.'),
    upstream: upstreamSchema.describe('The Battery Product and Traceability Scan Service and how to reach it.'),
    buffer: bufferSchema.prefault({}).describe('The durable SQLite buffer (outbox) every read is committed to before it is acknowledged.'),
    delivery: deliverySchema.prefault({}).describe('How buffered scans are batched, uploaded and followed upstream.'),
    http: httpSchema.prefault({}).describe('The local HTTP server: health page, status API, metrics, HTTP ingest.'),
    sandbox: sandboxSchema.prefault({}).describe('The embedded emulator of the upstream service, for demos.'),
    log: z
      .object({
        level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace']).default('info').describe('Least severe level written.'),
        format: z
          .enum(['auto', 'json', 'pretty'])
          .default('auto')
          .describe('json = one JSON object per line (journald); pretty = for people; auto = pretty on a terminal, else json.'),
      })
      .strict()
      .prefault({})
      .describe('Logs go to stdout; secrets and tokens are always redacted.'),
    dcps: z.array(dcpSchema).min(1).describe('Data collection points of this site.'),
    inputs: z.array(inputSchema).describe('Where reads come from.'),
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
      .describe('Container sessions: a read matching `open` (a pallet SSCC, a tray) becomes the parent of the reads after it at the same input or DCP.'),
    timeCheck: timeCheckSchema.prefault({}).describe('Plausibility of source time stamps.'),
    productCheck: productCheckSchema.prefault({}).describe('Checks of mapped product model keys against the upstream product list.'),
  })
  .strict()
  // Runs even when parts are invalid, so one `config check` reports every mistake at once.
  .superRefine(crossCheck, { when: () => true });

export type GatewayConfig = z.infer<typeof configSchema>;
export type DcpConfig = z.infer<typeof dcpSchema>;
export type { InputConfig, FilesInputConfig, SerialInputConfig } from './input-schemas.js';
export type DeliveryConfig = z.infer<typeof deliverySchema>;
export type UpstreamConfig = z.infer<typeof upstreamSchema>;
export type { RuleConfig, ContainerConfig, MatchConfig, ValueConfig, ValueSource, TimeCheckConfig, ProductCheckConfig } from './rules-schema.js';

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
