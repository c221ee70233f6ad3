import type { RunningSandboxSftp } from './sftp.js';
import type { ListenerLimits } from '@scan-gateway/service-kit/listener-limits';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Logger } from './log.js';

/**
 * Shapes of the sandbox: its options, its fault-injection knobs and what `startSandbox` returns.
 */

const rate = z.number().min(0).max(1);

/**
 * Fault injection. The first five apply to `/api/*` and the pre-signed PUT; the `token*` ones to
 * `/oauth2/token` only; nothing reaches `/_sandbox/*`. Rates are probabilities per request, checked
 * in this order: latency, reset, rate limit (API) or unreadable answer (token), error.
 */
export const faultsSchema = z
  .object({
    errorRate: rate.describe('Share of requests answered 500 or 503 (alternating).'),
    rateLimitRate: rate.describe('Share of requests answered 429 with Retry-After.'),
    retryAfterSec: z.number().min(0).describe('Retry-After of the 429 answers, in seconds.'),
    latencyMs: z.number().min(0).describe('Delay added before every answer, in ms.'),
    resetRate: rate.describe('Share of requests whose connection is destroyed without an answer.'),
    tokenTtlSec: z
      .number()
      .positive()
      .optional()
      .describe('Overrides the token lifetime of new tokens, in s.'),
    processingDelayMs: z
      .number()
      .min(0)
      .optional()
      .describe('Overrides the processing time of new batches, in ms.'),
    lostAnswerRate: rate
      .optional()
      .describe(
        'Share of uploads (direct POST, pre-signed PUT) taken and processed whose connection is then destroyed before the answer.',
      ),
    answerDelayMs: z
      .number()
      .min(0)
      .optional()
      .describe(
        'Delay between processing an upload (direct POST, pre-signed PUT) and answering it, in ms: widens the window in which a client may die with its answer unrecorded.',
      ),
    directLimitBytes: z
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        'Lowers the size from which a direct upload is refused with 413, in bytes (default: the 5.8 MiB of the contract).',
      ),
    tokenLatencyMs: z
      .number()
      .min(0)
      .optional()
      .describe('Delay added before every answer of /oauth2/token, in ms (a slow auth server).'),
    tokenResetRate: rate
      .optional()
      .describe(
        'Share of token requests whose connection is destroyed without an answer; 1 = the auth server is down.',
      ),
    tokenErrorRate: rate
      .optional()
      .describe('Share of token requests answered 500 or 503 (alternating), OAuth-style JSON.'),
    tokenUnreadableRate: rate
      .optional()
      .describe(
        'Share of token requests answered 200 with a body that is not a token answer (cut-off JSON).',
      ),
    kafkaDown: z
      .boolean()
      .optional()
      .describe(
        'The Kafka endpoint is down: it stops listening and cuts its connections (connections are refused) until this is cleared; events published meanwhile are kept.',
      ),
    kafkaSaslRefused: z
      .boolean()
      .optional()
      .describe(
        'The Kafka endpoint refuses every SASL authentication (SASL_AUTHENTICATION_FAILED), as for a wrong password.',
      ),
    kafkaEventDelayMs: z
      .number()
      .min(0)
      .optional()
      .describe(
        'Delay between a batch changing state and its status event reaching the topic, in ms.',
      ),
    kafkaDuplicateRate: rate
      .optional()
      .describe(
        'Share of status events published twice (the same key and payload at two offsets).',
      ),
  })
  .strict();
export type Faults = z.infer<typeof faultsSchema>;

/** A change of faults (PUT /_sandbox/faults, `setFaults`); `null` clears an optional override. */
export const faultsPatchSchema = z
  .object({
    errorRate: rate.optional(),
    rateLimitRate: rate.optional(),
    retryAfterSec: z.number().min(0).optional(),
    latencyMs: z.number().min(0).optional(),
    resetRate: rate.optional(),
    tokenTtlSec: z.number().positive().nullable().optional(),
    processingDelayMs: z.number().min(0).nullable().optional(),
    lostAnswerRate: rate.nullable().optional(),
    answerDelayMs: z.number().min(0).nullable().optional(),
    directLimitBytes: z.number().int().positive().nullable().optional(),
    tokenLatencyMs: z.number().min(0).nullable().optional(),
    tokenResetRate: rate.nullable().optional(),
    tokenErrorRate: rate.nullable().optional(),
    tokenUnreadableRate: rate.nullable().optional(),
    kafkaDown: z.boolean().nullable().optional(),
    kafkaSaslRefused: z.boolean().nullable().optional(),
    kafkaEventDelayMs: z.number().min(0).nullable().optional(),
    kafkaDuplicateRate: rate.nullable().optional(),
  })
  .strict();

/** A change of faults: any subset, `null` clearing an optional override. */
export type FaultsPatch = z.infer<typeof faultsPatchSchema>;

/** No faults: every request answered normally. */
export const NO_FAULTS: Faults = {
  errorRate: 0,
  rateLimitRate: 0,
  retryAfterSec: 1,
  latencyMs: 0,
  resetRate: 0,
};

/** One OAuth client the sandbox knows, with the DCPs its scans may use. */
export interface SandboxClient {
  clientId: string;
  clientSecret: string;
  /** DCP keys of this client; a scan with another DCP fails with reason `Invalid DCP`. */
  dcps: string[];
  /** Products the client has at start (GET /api/product/v3/products). */
  products?: Array<{ key: string; name: string }>;
  /**
   * The client internal name of contract §5, part of its status topic
   * `sandbox-<internalName>-status-event` (§6). Default the client id.
   */
  internalName?: string;
}

/** The Kafka endpoint of a sandbox (contract §5, §6): where it listens and how long it keeps events. */
export interface SandboxKafkaOptions {
  /** Address to bind. Default: the sandbox's `host`. */
  host?: string;
  /**
   * Port; 0 = any free port. Default 9093, or 0 when the sandbox's own `port` is 0 (so tests
   * that start many sandboxes do not collide).
   */
  port?: number;
  /** Most events kept per topic; older ones are dropped (the log start offset moves). Default 10 000. */
  maxEvents?: number;
  /** Oldest event kept, in ms. Default 3 600 000 (1 h). */
  maxAgeMs?: number;
  /** Most open Kafka connections. Default 64. */
  maxConnections?: number;
  /** Largest Kafka request, in bytes. Default 2 MiB. */
  maxRequestBytes?: number;
  /** Most consumer groups. Default 100. */
  maxGroups?: number;
  /** Most members of one consumer group. Default 16. */
  maxGroupMembers?: number;
}

/** What `GET /_sandbox/kafka` answers: how a client connects to one client's status topic. */
export interface SandboxKafkaInfo {
  /** `host:port`. */
  bootstrapServers: string;
  /** `sandbox-<internalName>-status-event`. */
  topic: string;
  securityProtocol: 'SASL_SSL';
  saslMechanism: 'SCRAM-SHA-512';
  /** The sandbox CA's certificate (PEM), made at start: the only trust anchor that works. */
  caPem: string;
}

/** Options of `startSandbox`. */
export interface SandboxOptions {
  /** Address to bind. Default 127.0.0.1. */
  host?: string;
  /** Port; 0 = any free port. Default 8090. */
  port?: number;
  /** Known clients. Default: `demo-client` with the secret of config/demo-client-secret. */
  clients?: SandboxClient[];
  /**
   * The file of `demo-client`'s secret, when {@link clients} is not given. Default:
   * config/demo-client-secret of the scan-gateway package the sandbox sits in (the daemon passes
   * its own).
   */
  demoSecretFile?: string;
  /**
   * What `demo-client` accepts, when {@link clients} is not given: its DCP keys and products.
   * Default {@link DEMO_DCPS} and {@link DEMO_PRODUCTS}; the embedded sandbox passes those of the
   * gateway's configuration, so a valid site configuration is not refused only after upload.
   */
  demoAccepts?: { dcps?: string[]; products?: Array<{ key: string; name: string }> };
  /** Lifetime of access tokens, in s. Default 3600 (contract §5). */
  tokenTtlSec?: number;
  /** Time from upload to terminal state, in ms: Received for the first half, InProgress for the second. Default 1000. */
  processingDelayMs?: number;
  /** Validity of pre-signed addresses, in ms. Default 30 min (contract §4.4). */
  presignedTtlMs?: number;
  /** Most accepted scans kept for `GET /_sandbox/scans` (older ones are dropped). Default 100 000. */
  maxLoggedScans?: number;
  faults?: Partial<Faults>;
  logger?: Logger;
  /** Timeouts and connection cap; default the gateway's `http.limits` defaults. */
  limits?: ListenerLimits;
  /** The Kafka endpoint (`startSandbox` only); `false` = none. Default: on, see {@link SandboxKafkaOptions}. */
  kafka?: SandboxKafkaOptions | false;
  /**
   * The SFTP endpoint (sftp.ts): on `port` (0 = any), files under `root`
   * (default a new temporary folder), besides the password (the client secret) the public keys of
   * `authorizedKeys` per client id. Off without this option.
   */
  sftp?: {
    port?: number;
    root?: string;
    authorizedKeys?: Record<string, string[]>;
    hostKey?: string;
  };
}

/** A started sandbox. */
export interface RunningSandbox {
  /** Base address, e.g. `http://127.0.0.1:8090`; both the service and the auth base URL. */
  url: string;
  /** The serving fastify instance (a new one after {@link restart}). */
  app: FastifyInstance;
  /** Merge a change into the current faults (as PUT /_sandbox/faults); `null` clears an optional one. */
  setFaults(f: FaultsPatch): void;
  /**
   * The Kafka endpoint, undefined with `kafka: false`. `info(clientId)` is what
   * `GET /_sandbox/kafka?clientId=` answers (default: the first client); undefined for an unknown client.
   */
  kafka?: {
    bootstrapServers: string;
    caPem: string;
    info(clientId?: string): SandboxKafkaInfo | undefined;
    /** Appends records as they are to a client's topic, past the faults (tests of bad events); the first offset, undefined for an unknown client. */
    appendRaw(
      clientId: string,
      records: Array<{ key: string | null; value: string | null }>,
    ): number | undefined;
  };
  /**
   * Restarts the service as a real one restarts: stops listening (open connections are cut), stays
   * away `downMs` (connections are refused meanwhile), then listens again on the same address with
   * the same state: products, batches and their processing, pre-signed addresses, the token signing
   * key (tokens stay valid), faults and the inspection logs. `app` is a new fastify instance after it.
   */
  restart(options?: { downMs?: number }): Promise<void>;
  /** Stops listening and closes open connections. Safe to call more than once. */
  close(): Promise<void>;
  /** The SFTP endpoint, when `SandboxOptions.sftp` asked for one (not restarted by {@link restart}). */
  sftp?: RunningSandboxSftp;
}

/** DCPs of the default client: every DCP of config/demo.yaml and config/example.yaml. */
export const DEMO_DCPS = ['GI-01', 'SOP-3', 'EOL-3', 'GO-01'] as const;

/** Client id of the default client. */
export const DEMO_CLIENT_ID = 'demo-client';

/** Products the default client has at start (the product keys of the demo and example configs). */
export const DEMO_PRODUCTS = [
  { key: 'PACK-A', name: 'Battery pack A' },
  { key: 'MOD-48V', name: 'Module 48 V' },
] as const;
