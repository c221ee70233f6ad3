import type { Logger } from '../log.js';
import type { SandboxTls } from './ca.js';
import type { GroupLimits } from './groups.js';
import type { Retention } from './topic-log.js';

/** Bounds of the broker; every one is a number a test or the sandbox file can set. */
export interface BrokerLimits {
  /** Most open connections; more are closed at once. Default 64. */
  maxConnections: number;
  /** Largest request frame, in bytes (Kafka's socket.request.max.bytes is 100 MiB). Default 2 MiB. */
  maxRequestBytes: number;
  /**
   * Requests read ahead of the one being answered, per connection; beyond it, or beyond
   * `maxRequestBytes` of them, the socket is paused. Default 32.
   */
  maxQueuedRequests: number;
  /** Time from connect to successful SASL authentication, in ms. Default 10 000. */
  authTimeoutMs: number;
  /** An idle connection is closed after this, in ms (Kafka's connections.max.idle.ms is 10 min). Default 600 000. */
  idleTimeoutMs: number;
  /** Longest a Fetch waits for data, whatever its maxWaitMs says, in ms. Default 30 000. */
  maxFetchWaitMs: number;
}

export const DEFAULT_BROKER_LIMITS: BrokerLimits = {
  maxConnections: 64,
  maxRequestBytes: 2 * 1024 * 1024,
  maxQueuedRequests: 32,
  authTimeoutMs: 10_000,
  idleTimeoutMs: 600_000,
  maxFetchWaitMs: 30_000,
};

/** One SASL user and the one topic it reads and writes. */
export interface BrokerUser {
  user: string;
  password: string;
  topic: string;
}

/** The faults the broker obeys, read on every use (the sandbox's fault switch). */
export interface BrokerFaults {
  /** SaslAuthenticate fails for everyone (SASL_AUTHENTICATION_FAILED). */
  saslRefused: boolean;
}

/** What a `KafkaBroker` is made with (broker.ts). */
export interface BrokerOptions {
  host: string;
  /** 0 = any free port. */
  port: number;
  /** Host and port put in Metadata and FindCoordinator; default the listening ones (127.0.0.1 for a wildcard host). */
  advertised?: { host?: string; port?: number };
  tls: SandboxTls;
  users: BrokerUser[];
  retention?: Partial<Retention>;
  limits?: Partial<BrokerLimits>;
  groups?: Partial<GroupLimits>;
  faults?: () => BrokerFaults;
  logger: Logger;
}
