import type { BackPressure } from '../buffer/back-pressure.js';
import type { DiskGuard } from '../buffer/disk-guard.js';
import type { Retention } from '../buffer/retention.js';
import type { BufferStore } from '../buffer/store.js';
import type { BufferQueries } from '../queries/queries.js';
import type { Intake } from '../intake/intake.js';
import type { LoadedConfig } from '../config/load.js';
import type { ReloadReport } from '../config/reload.js';
import type { InputConfig } from '../config/schema.js';
import type { Deliverer } from '../delivery/deliverer.js';
import type { DeliveryApi } from '../delivery/types.js';
import type { AdminActions } from '../health/admin.js';
import type { GatewayMetrics } from '../health/metrics.js';
import type { InputAdapter, IntakeSink } from '../inputs/types.js';
import type { Logger } from '../log.js';
import type { Mapper } from '../mapping/mapper.js';
import type { ProductCheckOptions } from '../mapping/product-check.js';
import type { Clock } from '../clock.js';
import type { UpstreamClientOptions } from '../upstream/client.js';
import type { ListenerTls } from '../listener/listener-tls.js';
import type { RotatingToken } from '../listener/rotating-token.js';
import type { HaParts } from './ha-part.js';
import type { Component } from './parts.js';
import type { InputFactory, InputSupervisor } from './inputs.js';
import type { HttpPart } from './http-part.js';
import type { ProductCheckPart } from './product-check-part.js';
import type { SandboxPart } from './sandbox-part.js';
import type { SftpRoute } from './delivery-parts.js';
import type { StatusEventsPart } from './status-events-part.js';

/**
 * The upstream API as the app uses it: delivery's calls, and what the client has besides them (its
 * close, its token figures, the product list of contract §4.1). A test's API may leave those out:
 * without `listProducts` the product check is off.
 */
export type AppApi = DeliveryApi & {
  close?: () => Promise<void>;
  tokenInfo?: () => { expiresAt?: Date; refreshes: number };
  listProducts?: ProductCheckOptions['listProducts'];
  /** Applies a reload's credentials, bounds and CA, proven first (`UpstreamClient.reconfigure`). */
  reconfigure?: (options: UpstreamClientOptions) => Promise<string[]>;
};

/** What `buildApp` (src/app.ts) takes besides the configuration: the process edge's pieces, and the seams tests use. */
export interface AppDeps {
  logger: Logger;
  now?: Clock;
  /** Builds the adapter for one input; the default knows every `type` of the schema. */
  createInput?: (
    config: InputConfig,
    sink: IntakeSink,
    logger: Logger,
  ) => InputAdapter | Promise<InputAdapter>;
  /** Environment for secrets the inputs name (`passwordEnv`, `tokenEnv`); from the process edge. */
  env?: Record<string, string | undefined>;
  /** The upstream API; the default is the undici client built from the configuration. */
  api?: AppApi;
  /** Bearer token of the admin actions (health server); without it they are off. */
  adminToken?: string;
  /** Read token of the health page, status and metrics (`http.readTokenFile`); without it they are open. */
  readToken?: string;
  /**
   * Cuts known secrets out of text that leaves the process other than by the log: status JSON,
   * health page, `failed/*.error.txt`, reasons stored in the buffer (the log's scrubber).
   */
  scrub?: (text: string) => string;
  /** Longest a stop waits for an upload in flight, in ms (default {@link DELIVERY_STOP_GRACE_MS}). */
  deliveryStopGraceMs?: number;
}

/** Longest a stop waits for an upload in flight before abandoning it, in ms (run-command.ts has the overall deadline). */
export const DELIVERY_STOP_GRACE_MS = 15_000;

/**
 * What changes while the gateway runs: its phase, and what a configuration reload replaces (the
 * configuration in force, the mapping) and reports.
 */
export interface LiveState {
  phase: 'starting' | 'running' | 'stopping';
  current: LoadedConfig;
  configLoadedAt: Date;
  mapper: Mapper;
  lastReload?: {
    at: string;
    needsRestart: string[];
    inputErrors: ReloadReport['inputErrors'];
    /** Secrets and settings the reload applied without a restart, by name (never a value). */
    applied: string[];
  };
  lastReloadError?: { message: string; at: string };
}

/**
 * Every part of one gateway, built by `buildApp` before any starts. Optional parts are undefined
 * exactly when the configuration leaves them out; nothing here is filled in later. The app's own
 * record: the status, the HTTP server, a reload and HA are each given only what they use
 * (`StatusParts`, `HttpServerParts`, `ReloadParts`, `HaPartParts`).
 */
export interface Gateway {
  readonly config: LoadedConfig['config'];
  readonly deps: AppDeps;
  readonly logger: Logger;
  readonly now: Clock;
  readonly startedAt: Date;
  readonly store: BufferStore;
  /** The buffer's questions on a read-only connection of their own (src/queries/). */
  readonly queries: BufferQueries;
  /** The embedded sandbox, when `sandbox.enabled`. */
  readonly sandbox: SandboxPart | undefined;
  readonly api: AppApi;
  readonly backPressure: BackPressure;
  readonly retention: Retention;
  readonly diskGuard: DiskGuard;
  readonly intake: Intake;
  readonly deliverer: Deliverer;
  /** The SFTP route of delivery, when `upstream.sftp` is configured. */
  readonly sftp: SftpRoute | undefined;
  /** Status events, when `upstream.statusEvents.enabled`. */
  readonly statusEvents: StatusEventsPart | undefined;
  readonly productCheck: ProductCheckPart;
  readonly inputs: InputSupervisor;
  readonly createInput: InputFactory;
  /** High availability, when `ha` is configured: the etcd client and the leader election. */
  readonly ha: HaParts | undefined;
  readonly http: HttpPart;
  /** The local server's certificate, when `http.tls` is configured. */
  readonly listenerTls: ListenerTls | undefined;
  /** The admin and read tokens of the local server, from `deps`; a reload replaces them. */
  readonly serverTokens: { readonly admin: RotatingToken; readonly read: RotatingToken };
  readonly metrics: GatewayMetrics;
  readonly adminActions: AdminActions;
  readonly live: LiveState;
  /** Components whose start began, in order; a stop goes through them in reverse. A reload adds and removes inputs. */
  readonly running: Component[];
}
