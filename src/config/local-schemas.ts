import { LISTENER_LIMIT_DEFAULTS } from '@scan-gateway/service-kit/listener-limits';
import { z } from 'zod';
import { isIP } from 'node:net';

/**
 * The sections of the configuration about this machine: the `buffer` (the SQLite outbox), the
 * local `http` server and its limits, and the embedded `sandbox`. Part of the one configuration
 * schema (schema.ts).
 */

const listenAddress = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/, 'must be host:port, e.g. 127.0.0.1:8080');

export const bufferSchema = z
  .object({
    path: z
      .string()
      .min(1)
      .default('var/buffer.db')
      .describe('SQLite file of the durable buffer (outbox).'),
    maxPendingScans: z
      .number()
      .int()
      .positive()
      .default(20_000_000)
      .describe(
        'Quota: most undelivered scans. Near it, inputs that can wait pause; at it, new scans are refused (docs/delivery.md). The default holds about five days of scans of a 40 GWh cell plant (3.5 M a day), so a weekend without the cloud is ridden out (docs/performance.md, "A weekend without the cloud").',
      ),
    maxBytes: z
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        "Quota: most bytes of undelivered scans (their JSON). Not set: derived from the buffer's file system at start and every second, what it can hold (the buffer's files and the free space, less the 4 MiB reserve, the low-space mark and 4 MiB for the write-ahead log, at 3.5 bytes on disk per byte of JSON), at least 1 MiB, at most 16 GiB, so the quota is reached before the disk is (docs/operations.md §9). Set larger than the disk holds, it is warned about (config check, page).",
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
      .describe(
        'Share of the quota below which paused inputs resume; below pauseAtRatio so they do not flap.',
      ),
    retentionDays: z
      .number()
      .min(0)
      .default(30)
      .describe(
        'Audit period: delivered scans are kept this many days with their requestId and final state, then pruned. Takes effect on reload.',
      ),
    earlyPruneKeepHours: z
      .number()
      .min(0)
      .default(24)
      .describe(
        'When the disk runs low, delivered scans are pruned before their audit period ends, oldest first and only what frees the shortfall; those of batches finished within this many hours are never pruned early.',
      ),
  })
  .strict()
  .refine((b) => b.resumeAtRatio < b.pauseAtRatio, {
    message: 'resumeAtRatio must be below pauseAtRatio',
    path: ['resumeAtRatio'],
  });

/**
 * Timeouts and connection cap of a local HTTP listener (health/ingest server, sandbox), and the
 * fair shares of the health/ingest server (connections and station streams per client address,
 * item lookups at once and waiting; the sandbox takes only the first six). Defaults
 * ({@link DEFAULT_HTTP_LIMITS}) are far above what a page, a probe, a scraper or an MES posting
 * reads needs, and far below what lets idle or half-open connections pile up.
 */
export const httpLimitsSchema = z
  .object({
    maxConnections: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(LISTENER_LIMIT_DEFAULTS.maxConnections)
      .describe(
        'Most connections open at once; a connection past it is closed at once, before a byte is read.',
      ),
    headersTimeoutMs: z
      .number()
      .int()
      .min(100)
      .default(LISTENER_LIMIT_DEFAULTS.headersTimeoutMs)
      .describe(
        'Longest time from a connection (or the end of the previous request) to a complete request head, in ms; a slower or silent client is disconnected (408 or closed).',
      ),
    requestTimeoutMs: z
      .number()
      .int()
      .min(100)
      .default(LISTENER_LIMIT_DEFAULTS.requestTimeoutMs)
      .describe(
        'Longest time to receive a whole request (head and body), in ms; at least headersTimeoutMs.',
      ),
    keepAliveTimeoutMs: z
      .number()
      .int()
      .min(100)
      .default(LISTENER_LIMIT_DEFAULTS.keepAliveTimeoutMs)
      .describe('How long an idle keep-alive connection stays open after an answer, in ms.'),
    idleTimeoutMs: z
      .number()
      .int()
      .min(100)
      .default(LISTENER_LIMIT_DEFAULTS.idleTimeoutMs)
      .describe(
        'A connection with no traffic in either direction for this long is closed, in ms (also bounds a slow answer being read).',
      ),
    maxRequestsPerSocket: z
      .number()
      .int()
      .min(0)
      .default(LISTENER_LIMIT_DEFAULTS.maxRequestsPerSocket)
      .describe('Most requests on one keep-alive connection before it is closed; 0 = no limit.'),
    maxRequestsPerConnectionPerSecond: z
      .number()
      .int()
      .min(0)
      .max(100_000)
      .default(100)
      .describe(
        'Most requests one connection sends per second, pipelined or one after another (all of them at once at most); the first past it is answered 429 with Retry-After and the connection is closed. Health server only; 0 = no limit.',
      ),
    maxConnectionsPerClient: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(64)
      .describe(
        'Most connections one client address holds at once (at most maxConnections). Past it, the connection of that address that has waited longest without a request in flight (idle, or never sent a complete request head) is closed to make room; when every one of them has a request in flight, the new connection is closed instead.',
      ),
    connectionGraceMs: z
      .number()
      .int()
      .min(0)
      .max(60_000)
      .default(250)
      .describe(
        'Time a new connection has to send its request head before it counts as idle for maxConnectionsPerClient, in ms: a burst of real requests is not cut while their heads are being read.',
      ),
    trustedReserve: z
      .number()
      .int()
      .min(0)
      .max(10_000)
      .default(16)
      .describe(
        'Connections of maxConnections that only 127.0.0.1, ::1 and the addresses of http.trustedClients may take (at most a quarter of maxConnections): other addresses together hold at most maxConnections minus this, so the probes and the page are answered whatever they do.',
      ),
    tlsHandshakeTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(60_000)
      .default(3_000)
      .describe(
        'With http.tls: longest time from a connection to a finished TLS handshake, in ms; a slower or silent client is closed and logged with its address. A real handshake takes milliseconds, even on a busy gateway.',
      ),
    maxPendingHandshakes: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .default(32)
      .describe(
        'With http.tls: unfinished TLS handshakes of addresses other than 127.0.0.1, ::1 and http.trustedClients at once. A new one past it closes the oldest unfinished handshake of the address holding the most, so slow or silent handshakes from a few addresses cannot lock the others out.',
      ),
    maxItemLookups: z
      .number()
      .int()
      .min(1)
      .max(16)
      .default(1)
      .describe(
        'Item lookups (GET /api/v1/items…) worked on at once, each in a thread of its own with a read-only connection to the buffer (started at the first lookup): the event loop only passes the question and the answer, so probes and ingest are served while lookups run.',
      ),
    maxQueuedItemLookups: z
      .number()
      .int()
      .min(0)
      .max(10_000)
      .default(16)
      .describe('Item lookups waiting for their turn; one more is answered 429 with Retry-After.'),
    maxStationStreamsPerClient: z
      .number()
      .int()
      .min(1)
      .max(32)
      .default(8)
      .describe(
        'Station screen event streams one client address holds at once (of 32 in all); one more is answered 503 with Retry-After.',
      ),
    stationStreamStallMs: z
      .number()
      .int()
      .min(100)
      .default(30_000)
      .describe(
        'A station event stream whose client has not taken what was sent (the send buffer stays full) for this long is closed, in ms, freeing its slot.',
      ),
  })
  .strict()
  .refine((l) => l.requestTimeoutMs >= l.headersTimeoutMs, {
    message: 'requestTimeoutMs must be at least headersTimeoutMs',
    path: ['requestTimeoutMs'],
  });

export type HttpLimitsConfig = z.infer<typeof httpLimitsSchema>;

/** The defaults of {@link httpLimitsSchema}, for listeners without a configuration (the sandbox command). */
export const DEFAULT_HTTP_LIMITS: HttpLimitsConfig = httpLimitsSchema.parse({});

/**
 * TLS of the local HTTP server (`http.tls`): PEM files, read at start, again on SIGHUP and when
 * they change (src/listener/listener-tls.ts); checked by `config check` (src/config/tls-files.ts).
 */
export const httpTlsSchema = z
  .object({
    certFile: z
      .string()
      .min(1)
      .describe(
        'PEM file of the server certificate (its intermediates may follow it in the same file). Read at start, on SIGHUP and when the file changes; a renewed certificate is served without a restart.',
      ),
    keyFile: z
      .string()
      .min(1)
      .describe(
        'PEM file of the private key of certFile (unencrypted; mode 0640, group scan-gateway). A key that does not match the certificate is refused: at start the gateway does not start, on a reload the running pair stays.',
      ),
    caFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'PEM file of the intermediate CA certificates sent after certFile, when they are not in certFile itself. Not the root: clients have it.',
      ),
    clientCaFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        'PEM file of the CA (or CAs) whose client certificates may post reads to HTTP ingest. When set, every client is asked for a certificate; the page, status, metrics and station screens work without one, but POST /api/v1/reads without a certificate is answered 401 and with one this CA did not sign 403. The ingest token is still required (docs/operations.md, "TLS on the local listener").',
      ),
  })
  .strict();

export type HttpTlsConfig = z.infer<typeof httpTlsSchema>;

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
      .array(
        z
          .string()
          .regex(
            /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(:\d{1,5})?$/,
            'must be a host name or address, optionally with :port, e.g. gateway-07.plant.local:8080',
          ),
      )
      .default([])
      .describe(
        "Host header values accepted besides localhost, 127.0.0.1, [::1] and the listen host (and, when listen is 0.0.0.0 or [::], this machine's host name and addresses). An entry without a port matches any port. Others are answered 421 (DNS rebinding defence).",
      ),
    trustedClients: z
      .array(
        z.string().refine(
          (entry) => {
            const [address = '', bits, ...rest] = entry.split('/');
            const family = isIP(address);
            if (family === 0 || rest.length > 0) return false;
            if (bits === undefined) return true;
            const n = Number(bits);
            return /^\d{1,3}$/.test(bits) && n <= (family === 4 ? 32 : 128);
          },
          { message: 'must be an IP address or a network as address/bits, e.g. 10.20.7.0/24' },
        ),
      )
      .default([])
      .describe(
        'Client addresses (or networks as address/bits) that share the reserve of connections kept for 127.0.0.1 and ::1 (http.limits.trustedReserve) and whose TLS handshakes do not count against http.limits.maxPendingHandshakes: the MES host, the central Prometheus, a local reverse proxy. The rest of 127.0.0.0/8 is not trusted unless listed.',
      ),
    tls: httpTlsSchema
      .optional()
      .describe(
        'Serve the page, the API, metrics, station screens and HTTP ingest over HTTPS with these PEM files (docs/operations.md, "TLS on the local listener"). Without it the server speaks plain HTTP: keep listen on loopback, or the tokens cross the network in clear text.',
      ),
    limits: httpLimitsSchema
      .prefault({})
      .describe(
        'Timeouts, connection cap and fair shares of the local HTTP server; the embedded sandbox uses the same defaults for its timeouts and cap.',
      ),
  })
  .strict();

/** Default address of the embedded sandbox's Kafka endpoint. */
export const DEFAULT_SANDBOX_KAFKA_LISTEN = '127.0.0.1:9093';

export const sandboxSchema = z
  .object({
    enabled: z
      .boolean()
      .default(false)
      .describe(
        "Start the built-in upstream sandbox inside the gateway (demo only). It knows this configuration's client (`upstream.clientId` and its secret), DCPs and products.",
      ),
    listen: listenAddress.default('127.0.0.1:8090').describe('Address of the embedded sandbox.'),
    dcps: z
      .array(z.string().min(1))
      .min(1)
      .optional()
      .describe(
        'DCP keys the embedded sandbox accepts. Default: the keys of `dcps` of this configuration (logged at start), so a scan the configuration maps is not refused as an invalid DCP.',
      ),
    products: z
      .array(z.string().min(1))
      .min(1)
      .optional()
      .describe(
        'Product model keys the embedded sandbox knows. Default: those the configuration names (DCPs, rules, their lookup tables; logged at start). List them here when reads supply their own product keys.',
      ),
    kafka: z
      .object({
        listen: listenAddress
          .default(DEFAULT_SANDBOX_KAFKA_LISTEN)
          .describe(
            "Address of the embedded sandbox's Kafka endpoint: status events over SASL_SSL with SCRAM-SHA-512, its own CA (GET /_sandbox/kafka hands it out).",
          ),
      })
      .strict()
      .prefault({})
      .describe(
        'The status-event endpoint of the embedded sandbox (contract §6), see docs/upstream.md.',
      ),
  })
  .strict();
