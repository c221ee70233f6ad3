import { z } from 'zod';
import { hasUrlCredentials, insecureUrlProblem } from './url-policy.js';

/**
 * The `upstream` and `delivery` sections of the configuration: the service and how to reach it
 * (HTTPS, the SFTP route, status events on its Kafka topic), and how buffered scans are batched,
 * uploaded and followed there. Part of the one configuration schema (schema.ts).
 */

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
    enabled: z
      .boolean()
      .default(false)
      .describe(
        'Read batch outcomes from the status topic (contract §6); polling slows down while events flow and takes over when they do not.',
      ),
    bootstrapServers: z
      .array(
        z
          .string()
          .regex(
            /^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/,
            'must be host:port, e.g. kafka-1.example.com:9093',
          ),
      )
      .default([])
      .describe(
        'Kafka bootstrap servers as host:port, from the service operator ({kafka_bootstrap_servers}). Required when enabled.',
      ),
    environment: z
      .string()
      .regex(/^[A-Za-z0-9._-]*$/, 'letters, digits, . _ - only')
      .default('')
      .describe(
        'The environment name in the topic ({env}), from the service operator. Required when enabled unless topic is set.',
      ),
    clientInternalName: z
      .string()
      .regex(/^[A-Za-z0-9._-]*$/, 'letters, digits, . _ - only')
      .optional()
      .describe(
        'The client internal name in the topic ({client_internal_name}), issued with the client id; default upstream.clientId.',
      ),
    topic: z
      .string()
      .regex(
        /^[A-Za-z0-9._-]{1,249}$/,
        'must be a Kafka topic name: letters, digits, . _ - (at most 249)',
      )
      .optional()
      .describe('The status topic; default <environment>-<clientInternalName>-status-event.'),
    caFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        "PEM bundle of extra certificate authorities for the brokers' TLS certificates (added to the default ones). Verification is always on.",
      ),
    trustSandboxCa: z
      .boolean()
      .default(false)
      .describe(
        'Demo only: trust the certificate authority of the embedded sandbox (sandbox.enabled) as well, taken from it in the process.',
      ),
    safetyPollMs: z
      .number()
      .int()
      .positive()
      .default(600_000)
      .describe(
        'While events flow, each uploaded batch is still polled this often (ms), in case an event never comes.',
      ),
    maxLagEvents: z
      .number()
      .int()
      .min(0)
      .default(1000)
      .describe(
        'When the consumer is more events than this behind the end of the topic, polling takes over at its normal pace until it caught up.',
      ),
    staleAfterMs: z
      .number()
      .int()
      // A fetch of a quiet topic returns only after the consumer's wait: a shorter staleness
      // flipped a healthy, quiet feed to `lagging` between reads.
      .min(STATUS_EVENTS_MIN_STALE_MS, {
        error: `must be at least ${STATUS_EVENTS_MIN_STALE_MS} ms: a read of a quiet topic returns only every ${STATUS_EVENTS_FETCH_WAIT_MS / 1000} s (the fetch wait), so a shorter value would count a healthy feed as stale`,
      })
      .default(30_000)
      .describe(
        `When no read of the topic succeeded for this long (ms, at least ${STATUS_EVENTS_MIN_STALE_MS}: a read of a quiet topic returns every ${STATUS_EVENTS_FETCH_WAIT_MS / 1000} s), the consumer counts as behind and polling takes over at its normal pace.`,
      ),
  })
  .strict()
  .superRefine((e, ctx) => {
    if (!e.enabled) return;
    if (e.bootstrapServers.length === 0)
      ctx.addIssue({
        code: 'custom',
        path: ['bootstrapServers'],
        message: 'status events need at least one bootstrap server (host:port)',
      });
    if (e.topic === undefined && e.environment === '')
      ctx.addIssue({
        code: 'custom',
        path: ['environment'],
        message: 'status events need the environment name of the topic (or topic itself)',
      });
  });

export type StatusEventsConfig = z.infer<typeof statusEventsSchema>;

/** The status topic of `upstream` (contract §6): `topic`, else `{env}-{client_internal_name}-status-event`. */
export function statusEventTopic(upstream: {
  clientId: string;
  statusEvents: Pick<StatusEventsConfig, 'topic' | 'environment' | 'clientInternalName'>;
}): string {
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
    passwordFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'File holding the SSH password, when no privateKeyFile is given (see privateKeyFile for the alternatives).',
      ),
    hostKey: z
      .string()
      .regex(
        /^SHA256:[A-Za-z0-9+/]{43}=?$/,
        'must be the SHA256 fingerprint as `ssh-keygen -lf` prints it, e.g. SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8',
      )
      .describe(
        "The server's host key fingerprint as `ssh-keygen -lf` prints it (SHA256:…). Required: a server showing another key is refused (no trust on first use).",
      ),
    remoteDir: z
      .string()
      .min(1)
      .default('.')
      .describe(
        'Folder on the server the batch files are written to (relative to the login folder, or absolute).',
      ),
    fileName: z
      .string()
      .min(1)
      .regex(/^[^/\\]+$/, 'must be a file name without folders')
      .refine(
        (t) => t.includes('{batchId}'),
        'must contain {batchId}, so that each batch has its own name',
      )
      .refine(
        (t) => !t.endsWith('.part'),
        'must not end in .part (the suffix of a file being written)',
      )
      .default('{siteId}-{batchId}-{sha256:12}.json')
      .describe(
        "Template of a batch file's name: {siteId}, {batchId}, {sha256:N} (the first N hex digits of the body's SHA-256), {sha256}. Fixed per batch, so a batch exists on the server at most once.",
      ),
    connectTimeoutMs: z
      .number()
      .int()
      .min(1000)
      .default(20_000)
      .describe('Deadline of the SSH connection and login, in ms.'),
  })
  .strict();

export const upstreamSchema = z
  .object({
    baseUrl: z.url().describe('Base address of the Battery Product and Traceability Scan Service.'),
    authUrl: z
      .url()
      .describe('Base address of the OAuth 2.0 token endpoint; `/oauth2/token` is appended.'),
    clientId: z.string().min(1).describe('OAuth 2.0 client id issued by the service operator.'),
    clientSecretFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'File holding the client secret. Alternatives: the environment variable SCAN_GATEWAY_CLIENT_SECRET, or a systemd credential named client-secret. A literal secret in this file is refused.',
      ),
    caFile: z
      .string()
      .optional()
      .describe('PEM bundle of extra certificate authorities (a site proxy CA).'),
    proxyUrl: z
      .url()
      .optional()
      .describe(
        'HTTP(S) proxy through which the service is reached, without user:password@ (see proxyCredentialsFile).',
      ),
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
      .describe(
        'Deadline of one whole HTTP exchange (connect, headers and the complete answer), in ms; uploads get more, see minUploadBytesPerSec.',
      ),
    minUploadBytesPerSec: z
      .number()
      .int()
      .positive()
      .default(32 * 1024)
      .describe(
        'Slowest upload rate still allowed to finish: a request with a body gets requestTimeoutMs plus its size at this rate.',
      ),
    maxAnswerBytes: z
      .number()
      .int()
      .min(1024)
      .default(1024 * 1024)
      .describe(
        'Most bytes read of any upstream answer (token, upload, status, errors); a larger 2xx answer is an error.',
      ),
    maxProductListBytes: z
      .number()
      .int()
      .min(1024)
      .default(16 * 1024 * 1024)
      .describe(
        'Most bytes read of the product list answer (contract §4.1 has no limit; 16 MiB hold about 150,000 products).',
      ),
    allowInsecureHttp: z
      .boolean()
      .default(false)
      .describe(
        'Lab only: allow plain http to a baseUrl/authUrl that is not loopback. The secret and the token then cross the network in clear; logged as a warning at every start.',
      ),
    statusEvents: statusEventsSchema
      .prefault({})
      .describe(
        "Status events on the service's Kafka topic (contract §6): batch outcomes within a second, polling as the fallback.",
      ),
    sftp: sftpSchema
      .optional()
      .describe(
        'The SFTP file transfer route for batches (contract §4.7; docs/delivery.md, "SFTP"). Needed by delivery.mode sftp and delivery.largeBatchRoute sftp.',
      ),
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
        message:
          'must not carry user:password@ (the file is not a secret store); put them in the file named by upstream.proxyCredentialsFile or in SCAN_GATEWAY_PROXY_CREDENTIALS',
      });
    }
  });

export const deliverySchema = z
  .object({
    mode: z
      .enum(['direct', 'presigned', 'sftp', 'auto'])
      .default('direct')
      .describe(
        'direct = POST each batch; presigned = pre-signed URL then PUT; sftp = every batch as a file over SFTP (upstream.sftp); auto = direct for small batches, largeBatchRoute for a backlog.',
      ),
    largeBatchRoute: z
      .enum(['presigned', 'sftp'])
      .default('presigned')
      .describe(
        'Route of the large batches of auto mode (a backlog, or a scan too large for a direct upload): presigned, or sftp (upstream.sftp).',
      ),
    maxBatchScans: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(5000)
      .describe('Most scans in one batch.'),
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
      .describe(
        'Most scans in one pre-signed batch (presigned mode, and auto mode with a backlog). The body is streamed from the buffer as it is sent, never built whole in memory.',
      ),
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
    sftpMaxScans: z
      .number()
      .int()
      .min(1)
      .default(500_000)
      .describe('Most scans in one SFTP batch.'),
    sftpMaxBytes: z
      .number()
      .int()
      .min(1024)
      .default(50 * 1024 * 1024)
      .describe(
        'Largest SFTP batch file, in bytes. The body is streamed from the buffer, never built whole in memory.',
      ),
    retryBaseMs: z
      .number()
      .int()
      .positive()
      .default(500)
      .describe('First retry delay (full jitter), in ms.'),
    retryMaxMs: z.number().int().positive().default(60_000).describe('Largest retry delay, in ms.'),
    statusPollMs: z
      .number()
      .int()
      .positive()
      .default(1000)
      .describe('First status poll interval, in ms; it grows.'),
    statusPollMaxMs: z
      .number()
      .int()
      .positive()
      .default(30_000)
      .describe('Largest status poll interval, in ms.'),
    notFoundGraceMs: z
      .number()
      .int()
      .positive()
      .default(120_000)
      .describe(
        'How long an uploaded batch may answer NotFound before it is sent again under a new requestId, in ms. A pre-signed batch whose single-use address can still take a PUT does not wait for it: it is PUT there again on the retry backoff (docs/delivery.md, Pre-signed recovery).',
      ),
  })
  .strict();
