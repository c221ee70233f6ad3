import { ErrorCodes, GatewayError } from '../errors.js';
import type { FastifyInstance } from 'fastify';
import { BackPressure } from '../buffer/back-pressure.js';
import { Intake } from '../buffer/intake.js';
import { Retention } from '../buffer/retention.js';
import { DERIVED_QUOTA_MAX_BYTES, DiskGuard, derivedQuotaForPath } from '../buffer/disk-guard.js';
import { BufferStore } from '../buffer/store.js';
import type { LoadedConfig } from '../config/load.js';
import type { ReloadReport } from '../config/reload.js';
import type { InputConfig } from '../config/schema.js';
import { Deliverer } from '../delivery/deliverer.js';
import { StatusEventFeed } from '../delivery/status-events.js';
import { STATUS_EVENTS_FETCH_WAIT_MS, statusEventTopic } from '../config/schema.js';
import type { DeliveryApi } from '../delivery/types.js';
import type { AdminActions } from '../health/admin.js';
import { isLoopbackHost } from '../listener/host-check.js';
import { instrumentDeliveryApi, type GatewayMetrics } from '../health/metrics.js';
import { buildHealthServer, type GatewayStatus } from '../health/server.js';
import type { InputAdapter, IntakeSink } from '../inputs/types.js';
import type { Logger } from '../log.js';
import { DEMO_CLIENT_SECRET_FILE } from '../paths.js';
import type { RunningSandbox } from '@scan-gateway/sandbox';
import { Mapper } from '../mapping/mapper.js';
import { ProductCheck } from '../mapping/product-check.js';
import { UpstreamClient, clientOptionsFromConfig } from '../upstream/client.js';
import type { SftpConnector } from '../upstream/sftp-client.js';
import { readSftpCredentials } from '../config/secrets.js';
import { readCaFile } from '../upstream/status-topic-ca.js';
import type { Clock } from '../clock.js';

/**
 * The gateway's parts as {@link Component}s, one small builder each, and what they share
 * ({@link Wiring}). src/app.ts lists them in order; each builder only constructs, starts and stops
 * its part, every behaviour lives in the part itself.
 *
 * The modules of optional parts (the embedded sandbox, each input type with its library, the SFTP
 * route, the status-event reader with its Kafka client) are loaded by `import()` when the part
 * starts, so a configuration that does not use them does not pay their memory and start-up time
 * (figures in docs/performance.md, "Footprint"). The Kafka client, the largest of them,
 * is loaded only once the gateway takes reads: status events start after the HTTP server listens.
 */

/** What `buildApp` (src/app.ts) takes besides the configuration: the process edge's pieces, and the seams tests use. */
export interface AppDeps {
  logger: Logger;
  now?: Clock;
  /** Builds the adapter for one input; the default knows every `type` of the schema. */
  createInput?: (config: InputConfig, sink: IntakeSink, logger: Logger) => InputAdapter | Promise<InputAdapter>;
  /** Environment for secrets the inputs name (`passwordEnv`, `tokenEnv`); from the process edge. */
  env?: Record<string, string | undefined>;
  /** The upstream API; the default is the undici client built from the configuration. */
  api?: DeliveryApi & { close?: () => Promise<void>; tokenInfo?: () => { expiresAt?: Date; refreshes: number } };
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
/** Longest a stop waits for the upstream connections to close, in ms. */
const UPSTREAM_CLOSE_GRACE_MS = 2_000;

/** Waits for `work` at most `ms`; answers false when it gave up (the work goes on unobserved). */
async function within(ms: number, work: Promise<void> | void | undefined): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([Promise.resolve(work).then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

function splitListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(':');
  return { host: listen.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(listen.slice(i + 1)) };
}

/**
 * The adapter for one configured input, by its `type`. Each type's module (and its library:
 * chokidar, serialport, mqtt) is loaded on first use only.
 */
export async function defaultInput(
  config: InputConfig,
  sink: IntakeSink,
  logger: Logger,
  extras: { env?: Record<string, string | undefined>; scrub?: (text: string) => string; now?: Clock } = {},
): Promise<InputAdapter> {
  const { env = {}, scrub, now } = extras;
  // The app's clock, so a test that sets the app's time sets the inputs' receivedAt and dated folders too.
  const clock = now ? { now } : {};
  switch (config.type) {
    case 'files': {
      const { FilesInput } = await import('../inputs/files/files-input.js');
      return new FilesInput({ config, sink, logger, ...clock, ...(scrub ? { scrub } : {}) });
    }
    case 'serial': {
      const { SerialInput } = await import('../inputs/serial/serial-input.js');
      return new SerialInput({ config, sink, logger, ...clock });
    }
    case 'mqtt': {
      const { MqttInput } = await import('../inputs/mqtt/mqtt-input.js');
      return new MqttInput({ config, sink, logger, env, ...clock });
    }
    case 'tcp': {
      const { TcpInput } = await import('../inputs/tcp/tcp-input.js');
      return new TcpInput({ config, sink, logger, ...clock });
    }
    case 'http': {
      const { HttpIngestInput } = await import('../inputs/http/http-input.js');
      return new HttpIngestInput({ config, sink, logger, env, ...clock });
    }
  }
}

/**
 * Runs a listen; an address in use or not allowed becomes an error that names the configuration
 * key, instead of a bare `listen EADDRINUSE`.
 */
async function listening<T>(key: string, address: string, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'EADDRINUSE') {
      throw new GatewayError(ErrorCodes.LISTEN, `${key} ${address}: the address is in use (another program, or another scan-gateway, listens there); stop it or choose another port`, { cause: err });
    }
    if (code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      throw new GatewayError(ErrorCodes.LISTEN, `${key} ${address}: cannot listen there (${code}: a port below 1024 needs privileges; the host must be an address of this machine)`, { cause: err });
    }
    throw err;
  }
}

/**
 * One part of the running gateway as the app starts and stops it: the parts start in the order of
 * the list `buildApp` (src/app.ts) makes and stop in reverse.
 */
export interface Component {
  /** Names the part in the log and in a failed stop's error (`stopping failed: delivery, input line-3`). */
  readonly name: string;
  start(): Promise<void>;
  /** Called once the start began, also when it failed half way: it must tolerate a part not (fully) started. */
  stop(): Promise<void>;
}

/**
 * What the parts share while the gateway runs. Each builder's component fills its own fields when
 * it starts, so a part finds every part before it in the list.
 */
export interface Wiring {
  readonly config: LoadedConfig['config'];
  readonly loaded: LoadedConfig;
  readonly deps: AppDeps;
  readonly logger: Logger;
  readonly now: Clock;
  readonly create: (config: InputConfig, sink: IntakeSink, logger: Logger) => InputAdapter | Promise<InputAdapter>;
  readonly startedAt: Date;
  readonly metrics: GatewayMetrics;
  readonly adminActions: AdminActions;
  /** The status now (src/app.ts composes it from the parts' snapshots). */
  readonly status: () => GatewayStatus;
  phase: 'starting' | 'running' | 'stopping';
  // Configuration reload: what runs now, and how the last reload went.
  current: LoadedConfig;
  configLoadedAt: Date;
  lastReload?: { at: string; needsRestart: string[]; inputErrors: ReloadReport['inputErrors'] };
  lastReloadError?: { message: string; at: string };
  store?: BufferStore;
  api?: AppDeps['api'];
  backPressure?: BackPressure;
  retention?: Retention;
  diskGuard?: DiskGuard;
  mapper?: Mapper;
  intake?: Intake;
  deliverer?: Deliverer;
  /** Status events, when `upstream.statusEvents.enabled`. */
  statusEvents?: StatusEventFeed;
  /** The embedded sandbox, when `sandbox.enabled`. */
  sandbox?: RunningSandbox;
  productCheck?: ProductCheck;
  readonly inputs: InputAdapter[];
  httpUrl?: string;
  /** Components whose start began, in order; a stop goes through them in reverse. A reload adds and removes inputs. */
  readonly running: Component[];
  /**
   * What starts once the gateway takes reads (buffer, delivery, inputs up, the HTTP server
   * listening): status events, which are not needed to take reads, so loading their Kafka client
   * does not delay the start. Run by the HTTP part at the end of its start; a part registered here
   * must tolerate its stop before that.
   */
  afterReady?: (() => void)[];
}

export function buildBuffer(w: Wiring): Component {
  return {
    name: 'buffer',
    start: async () => void (w.store = new BufferStore(w.config.buffer.path)),
    stop: async () => w.store?.close(),
  };
}

export function buildSandbox(w: Wiring): Component {
  let sandbox: RunningSandbox | undefined;
  return {
    name: 'sandbox',
    async start() {
      const { host, port } = splitListen(w.config.sandbox.listen);
      const kafka = splitListen(w.config.sandbox.kafka.listen);
      // The sandbox is a workspace package of its own (packages/sandbox), loaded only here and by
      // `scan-gateway sandbox`: a gateway without `sandbox.enabled` never loads it.
      const { startSandbox } = await import('@scan-gateway/sandbox');
      sandbox = await listening('sandbox.listen', w.config.sandbox.listen, () =>
        startSandbox({ host, port, kafka, logger: w.logger, demoSecretFile: DEMO_CLIENT_SECRET_FILE }),
      );
      w.sandbox = sandbox;
      w.logger.info({ component: 'app', url: sandbox.url }, 'embedded upstream sandbox started');
    },
    stop: async () => sandbox?.close(),
  };
}

export function buildUpstream(w: Wiring): Component {
  return {
    name: 'upstream',
    start: async () => void (w.api = w.deps.api ?? new UpstreamClient(clientOptionsFromConfig(w.config.upstream, w.loaded, w.logger))),
    // Bounded: undici's close waits for requests in flight, and an abandoned upload may still hang.
    stop: async () => void (await within(UPSTREAM_CLOSE_GRACE_MS, w.api?.close?.())),
  };
}

export function buildBackPressure(w: Wiring): Component {
  const logger = w.logger;
  return {
    name: 'back-pressure',
    async start() {
      // `buffer.maxBytes` not set: the byte quota comes from the disk; the disk guard rechecks it every minute.
      let derived: { bytes: number; ceilingBytes: number } | undefined;
      if (w.config.buffer.maxBytes === undefined) {
        try {
          derived = derivedQuotaForPath(w.config.buffer.path);
        } catch (err) {
          logger.warn({ component: 'buffer', err }, 'cannot examine the buffer\'s disk for its byte quota; using the largest default until the disk guard can');
          derived = { bytes: DERIVED_QUOTA_MAX_BYTES, ceilingBytes: DERIVED_QUOTA_MAX_BYTES };
        }
      }
      w.backPressure = new BackPressure({
        store: w.store!,
        limits: { ...w.config.buffer, maxBytes: w.config.buffer.maxBytes ?? derived!.bytes },
        logger: logger.child({ component: 'buffer' }),
        now: w.now,
        onDiskFull: () => w.diskGuard?.reportFull(),
        reserveReady: () => w.diskGuard?.reserveReady() ?? true,
        onPausedChange: (paused, why) => {
          for (const input of w.inputs) {
            if (!input.setPaused) continue;
            input.setPaused(paused);
            (paused ? logger.warn.bind(logger) : logger.info.bind(logger))({ component: 'buffer', input: input.id, paused, why }, paused ? 'input paused by back-pressure' : 'input resumed');
          }
        },
      });
      if (derived) w.backPressure.setByteQuota(derived.bytes, derived.ceilingBytes);
      w.backPressure.start();
    },
    stop: async () => w.backPressure?.stop(),
  };
}

export function buildRetention(w: Wiring): Component {
  return {
    name: 'retention',
    async start() {
      w.retention = new Retention({ store: w.store!, retentionDays: w.config.buffer.retentionDays, logger: w.logger.child({ component: 'retention' }), now: w.now });
      w.retention.start();
    },
    stop: async () => w.retention?.stop(),
  };
}

/** Reserve, early pruning of the audit under disk pressure, pages returned (src/buffer/disk-guard.ts). */
export function buildDiskGuard(w: Wiring): Component {
  return {
    name: 'disk guard',
    async start() {
      const quota = w.config.buffer.maxBytes;
      w.diskGuard = new DiskGuard({
        store: w.store!,
        retention: w.retention!,
        logger: w.logger.child({ component: 'buffer' }),
        now: w.now,
        ...(quota !== undefined ? { quotaBytes: quota } : { onDerivedQuota: (bytes: number, ceilingBytes: number) => w.backPressure?.setByteQuota(bytes, ceilingBytes) }),
      });
      w.diskGuard.start();
    },
    stop: async () => w.diskGuard?.stop(),
  };
}

export function buildIntake(w: Wiring): Component {
  return {
    name: 'intake',
    async start() {
      w.intake = new Intake({
        store: w.store!,
        mapping: (w.mapper = new Mapper(w.config)),
        logger: w.logger.child({ component: 'intake' }),
        now: w.now,
        onScansCommitted: () => w.deliverer?.wake(),
        gate: w.backPressure!,
        ...(w.deps.scrub ? { scrub: w.deps.scrub } : {}),
      });
    },
    stop: async () => w.intake?.close(),
  };
}

/**
 * The SFTP route of delivery when `upstream.sftp` is configured: the login is read now
 * (config/secrets.ts), so a missing key or password stops the start with `SCANGW_E_SECRET`.
 */
async function sftpRoute(w: Wiring): Promise<{ connector: SftpConnector; siteId: string; fileNameTemplate: string } | undefined> {
  const sftp = w.config.upstream.sftp;
  if (!sftp) return undefined;
  const login = readSftpCredentials(w.config, w.deps.env ?? {});
  const { sftpConnector } = await import('../upstream/sftp-client.js');
  return {
    connector: sftpConnector({ sftp, clientId: w.config.upstream.clientId, privateKey: login.privateKey, password: login.password, minBytesPerSec: w.config.upstream.minUploadBytesPerSec }),
    siteId: w.config.site.id,
    fileNameTemplate: sftp.fileName,
  };
}

export function buildDelivery(w: Wiring): Component {
  return {
    name: 'delivery',
    async start() {
      const sftp = await sftpRoute(w);
      w.deliverer = new Deliverer({
        store: w.store!,
        api: instrumentDeliveryApi(w.api!, w.metrics),
        config: w.config.delivery,
        logger: w.logger.child({ component: 'delivery' }),
        now: w.now,
        onDiskFull: (err) => w.backPressure?.diskFullSeen(err),
        // Status events start after delivery: until then (and when off) polling keeps its normal pace.
        pollPace: () => w.statusEvents?.pace() ?? { events: false, safetyPollMs: 0 },
        onUploaded: () => w.statusEvents?.batchUploaded(),
        ...(sftp ? { sftp } : {}),
      });
      w.deliverer.start();
    },
    async stop() {
      const graceMs = w.deps.deliveryStopGraceMs ?? DELIVERY_STOP_GRACE_MS;
      if (await within(graceMs, w.deliverer?.stop())) return;
      // The batch stays `uploading`/`presigned` in the buffer: the next start sends it again as a
      // possible duplicate (direct) or asks the service about its requestId first (pre-signed).
      w.logger.warn({ component: 'delivery', graceMs }, 'an upload was still in flight at the stop; abandoned, recovered at the next start');
    },
  };
}

/**
 * Status events (contract §6): the topic reader (upstream/status-topic.ts) feeding the
 * status tracker (delivery/status-events.ts). Off unless `upstream.statusEvents.enabled`.
 */
export function buildStatusEvents(w: Wiring): Component {
  return {
    name: 'status events',
    async start() {
      const { upstream } = w.config;
      const settings = upstream.statusEvents;
      if (!settings.enabled) return;
      // What can stop the start is checked now (the CA file, the sandbox's CA); the reader and its
      // Kafka client (about 30 MiB and, on this machine, 0.3 to 1 s of CPU for its option schemas)
      // are loaded at the first connect, after ready: the status says `starting` until then.
      const extraCaPems = [...(settings.caFile ? [readCaFile(settings.caFile)] : []), ...(settings.trustSandboxCa ? sandboxCa(w) : [])];
      const topic = statusEventTopic(upstream);
      const logger = w.logger.child({ component: 'status-events' });
      const secret = w.loaded.clientSecret;
      w.statusEvents = new StatusEventFeed({
        store: w.store!,
        topic,
        connect: async () =>
          new (await import('../upstream/status-topic.js')).StatusTopicReader({
            bootstrapServers: settings.bootstrapServers,
            topic,
            username: upstream.clientId,
            password: () => secret,
            extraCaPems,
            connectTimeoutMs: STATUS_EVENTS_CONNECT_MS,
            requestTimeoutMs: STATUS_EVENTS_FETCH_WAIT_MS + STATUS_EVENTS_CONNECT_MS,
            maxWaitMs: STATUS_EVENTS_FETCH_WAIT_MS,
            logger,
          }),
        apply: (ref, status, source) => w.deliverer!.applyStatus(ref, status, source),
        onPaceChange: () => w.deliverer?.wake(),
        safetyPollMs: settings.safetyPollMs,
        maxLagEvents: settings.maxLagEvents,
        staleAfterMs: settings.staleAfterMs,
        logger,
        now: w.now,
      });
      const feed = w.statusEvents;
      (w.afterReady ??= []).push(() => {
        feed.start();
        logger.info({ topic, bootstrapServers: settings.bootstrapServers, username: upstream.clientId }, 'status events: reading the topic');
      });
    },
    stop: async () => w.statusEvents?.stop(),
  };
}

/** Connect deadline of the status-event reader (TCP, TLS, SASL), ms. */
const STATUS_EVENTS_CONNECT_MS = 10_000;

/** The embedded sandbox's Kafka CA (`upstream.statusEvents.trustSandboxCa`, demo only). */
function sandboxCa(w: Wiring): string[] {
  const kafka = w.sandbox?.kafka;
  if (!kafka) throw new GatewayError(ErrorCodes.CONFIG, 'upstream.statusEvents.trustSandboxCa needs the embedded sandbox with its Kafka endpoint (sandbox.enabled: true)');
  return [kafka.caPem];
}

export function buildProductCheck(w: Wiring): Component {
  return { name: 'product check', start: async () => startProductCheck(w), stop: async () => w.productCheck?.stop() };
}

/** Checks the configured product keys against the service's list, when enabled and the API can list them. */
export function startProductCheck(w: Wiring): void {
  const lister = w.api as Partial<{ listProducts: () => Promise<ReadonlyArray<{ key: string }>> }> | undefined;
  const settings = w.current.config.productCheck;
  if (!settings.enabled || typeof lister?.listProducts !== 'function') return;
  w.productCheck = new ProductCheck({
    listProducts: () => lister.listProducts!(),
    configuredKeys: () => w.mapper?.productKeyUses() ?? [],
    observedKeys: () => w.mapper?.observedProductKeys() ?? [],
    onProducts: (keys, at) => w.mapper?.setKnownProducts(keys, at),
    intervalMs: settings.intervalMs,
    rejectUnknown: settings.rejectUnknown,
    logger: w.logger.child({ component: 'products' }),
    now: w.now,
  });
  w.productCheck.start();
}

/** One input; started paused while the buffer is near its quota (or the disk full). */
export function buildInput(w: Wiring, config: InputConfig): Component {
  let input: InputAdapter | undefined;
  return {
    get name() {
      return `input ${input?.id ?? config.id}`;
    },
    async start() {
      input = await w.create(config, w.intake!, w.logger);
      w.inputs.push(input);
      await input.start();
      if (w.backPressure?.snapshot().intakePaused) input.setPaused?.(true);
    },
    stop: async () => input?.stop(),
  };
}

export function buildHttp(w: Wiring): Component {
  let http: FastifyInstance | undefined;
  return {
    name: 'http',
    async start() {
      const { config, deps, logger } = w;
      const { host, port } = splitListen(config.http.listen);
      const server = buildHealthServer({
        logger,
        status: w.status,
        metrics: w.metrics,
        admin: { token: deps.adminToken, actions: w.adminActions },
        limits: config.http.limits,
        listenHost: host,
        allowedHosts: config.http.allowedHosts,
        readToken: deps.readToken,
        ...(deps.scrub ? { scrub: deps.scrub } : {}),
        station: {
          dcps: () => {
            const c = w.current.config;
            return c.dcps.map((d) => ({ key: d.key, kind: d.kind as string, inputs: c.inputs.filter((i) => i.dcp === d.key).map((i) => i.id) }));
          },
          site: () => w.current.config.site,
          recent: (keys, limit) => w.store!.reports.stationRecent(keys, limit),
          counts: (keys, sinceIso) => w.store!.reports.stationCounts(keys, sinceIso),
          readsAfter: (afterId, limit) => w.store!.reports.readsAfter(afterId, limit),
          lastReadId: () => w.store!.reports.lastReadId(),
          status: w.status,
        },
        items: {
          trace: (reference, depth) =>
            w.store!.reports.trace(reference, { ...(depth === undefined ? {} : { depth }), dcpKinds: new Map(w.current.config.dcps.map((d) => [d.key, d.kind as string])) }),
          search: (prefix, limit) => w.store!.reports.searchItems(prefix, limit),
        },
      });
      // The ingest routes' module only when an input has routes (an http input added by a reload is
      // served after a restart anyway: routes cannot be added to a listening server).
      if (w.inputs.some((i) => typeof (i as { registerRoutes?: unknown }).registerRoutes === 'function')) {
        const { registerInputRoutes } = await import('../inputs/http/http-input.js');
        await registerInputRoutes(server, () => w.inputs);
      }
      if (!isLoopbackHost(host) && deps.readToken === undefined) {
        logger.warn(
          { component: 'http', listen: config.http.listen },
          'http.listen is not loopback and no read token is configured: anyone who can reach it reads the health page, the status (DCPs, inputs, recent problems) and the metrics; set http.readTokenFile or SCAN_GATEWAY_READ_TOKEN (docs/operations.md)',
        );
      }
      w.httpUrl = await listening('http.listen', config.http.listen, () => server.listen({ host, port }));
      http = server;
      // The last part: the gateway takes reads now; what waited for this starts (status events).
      for (const start of w.afterReady?.splice(0) ?? []) start();
    },
    stop: async () => http?.close(),
  };
}
