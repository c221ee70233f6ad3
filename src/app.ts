import { ErrorCodes, GatewayError } from './errors.js';
import { BackPressure } from './buffer/back-pressure.js';
import { DERIVED_QUOTA_MAX_BYTES, DiskGuard } from './buffer/disk-guard.js';
import { Intake } from './intake/intake.js';
import { Retention } from './buffer/retention.js';
import { BufferStore } from './buffer/store.js';
import type { LoadedConfig } from './config/load.js';
import type { ReloadReport } from './config/reload.js';
import { statusEventTopic } from './config/schema.js';
import { Deliverer } from './delivery/deliverer.js';
import { StatusEventFeed } from './delivery/status-events.js';
import { buildAdminActions } from './health/admin-actions.js';
import { GatewayMetrics, instrumentDeliveryApi } from './health/metrics.js';
import type { GatewayStatus } from './health/server.js';
import { ListenerTls } from './listener/listener-tls.js';
import { Mapper } from './mapping/mapper.js';
import { ProductCheck } from './mapping/product-check.js';
import { VERSION } from './paths.js';
import { MARK_BUILD, MARK_CONFIG, MARK_MAIN } from './main/runtime.js';
import { UpstreamClient, clientOptionsFromConfig } from './upstream/client.js';
import {
  DELIVERY_STOP_GRACE_MS,
  type AppApi,
  type AppDeps,
  type Gateway,
  type LiveState,
} from './app/gateway.js';
import { buildHttpServer } from './app/http.js';
import type { RouteEntry } from './listener/route-guard.js';
import { defaultInput } from './app/inputs.js';
import {
  backPressurePart,
  bufferPart,
  deliveryPart,
  diskGuardPart,
  HttpPart,
  InputSet,
  inputPart,
  intakePart,
  ProductCheckPart,
  SandboxPart,
  SftpRoute,
  StatusEventsPart,
  timerPart,
  upstreamPart,
  type Component,
  type InputFactory,
} from './app/parts.js';
import { reloadGateway } from './app/reload.js';
import { HaPart, type HaParts } from './app/ha-part.js';
import { EtcdClient } from './ha/etcd-client.js';
import { Leadership } from './ha/leadership.js';
import { gatherStatus } from './app/status.js';

export { DELIVERY_STOP_GRACE_MS, type AppDeps } from './app/gateway.js';
export type { Component } from './app/parts.js';

export interface App {
  /**
   * Starts the parts in order, then runs each one's `ready` phase. Rejects with the first part's
   * error; the caller then stops (which stops what started).
   */
  start(): Promise<void>;
  /**
   * Stops in reverse order; every part is stopped even when one fails. Rejects when any failed.
   * Runs once: a second call answers the first call's promise.
   */
  stop(): Promise<void>;
  status(): GatewayStatus;
  /** Address the local HTTP server listens on, once started. */
  readonly httpUrl: string | undefined;
  /** The routes of the local HTTP server with the guard each declares, once started. */
  readonly httpRoutes: readonly RouteEntry[];
  /**
   * Applies a new, valid configuration while running (SIGHUP, file change): the mapping at once,
   * inputs whose settings changed are restarted, the others run on. Sections that need a restart
   * are reported in the answer and on the status. See src/config/reload.ts.
   */
  reload(loaded: LoadedConfig): Promise<ReloadReport>;
  /** Records a configuration that could not be loaded or applied: the running one stays; shown on the status. */
  reloadRefused(err: unknown): void;
}

/**
 * Builds the gateway: every part is constructed here, with its dependencies, and none does I/O
 * until `start()`. The start order is buffer → (embedded sandbox) → upstream client →
 * back-pressure → retention → disk guard → intake → delivery → (status events) → product check →
 * inputs → local HTTP server, then the `ready` phase. Wiring only; every behaviour lives in the
 * parts, the status in src/health/compose-status.ts.
 *
 * @throws GatewayError `CONFIG` for an upstream address the client refuses (plain http off
 *   loopback without `allowInsecureHttp`, a proxy URL with credentials), as `UpstreamClient` does.
 */
export function buildApp(loaded: LoadedConfig, deps: AppDeps): App {
  const g = buildGateway(loaded, deps);
  const inputPartFor = (c: LoadedConfig['config']['inputs'][number]) =>
    inputPart(c, {
      create: g.createInput,
      sink: g.intake,
      inputs: g.inputs,
      intakePaused: () => g.backPressure.snapshot().intakePaused,
      logger: g.logger,
    });
  const parts: Component[] = [
    bufferPart(g.store),
    ...(g.sandbox ? [g.sandbox] : []),
    upstreamPart(g.api),
    backPressurePart(g.backPressure, g.config.buffer, g.logger),
    timerPart('retention', g.retention),
    diskGuardPart(g.diskGuard),
    intakePart(g.intake),
    deliveryPart(g.deliverer, g.sftp, deps.deliveryStopGraceMs ?? DELIVERY_STOP_GRACE_MS, g.logger),
    ...(g.statusEvents ? [g.statusEvents] : []),
    g.productCheck,
    // Under `ha` the inputs run only while this node leads: the HA part starts and stops them.
    ...(g.ha ? [new HaPart(g, g.ha, inputPartFor)] : g.config.inputs.map(inputPartFor)),
    g.http,
  ];
  let stopping: Promise<void> | undefined;
  return {
    get httpUrl() {
      return g.http.url;
    },
    get httpRoutes() {
      return g.http.routes;
    },
    status: () => gatherStatus(g),
    async start() {
      // How long each part took to start, for the start-up line (the bench's start-up profile).
      const partMs: Record<string, number> = {};
      const startedAt = performance.now();
      for (const part of parts) {
        g.running.push(part);
        const t0 = performance.now();
        await part.start();
        partMs[part.name] =
          (partMs[part.name] ?? 0) + Math.round((performance.now() - t0) * 10) / 10;
      }
      // The gateway takes reads now; what waited for this starts (status events).
      for (const part of parts) part.ready?.();
      g.live.phase = 'running';
      // The version and the runtime in the start line: a package carries its own Node.js, and a support
      // question starts with which one ran.
      g.logger.info(
        {
          component: 'app',
          http: g.http.url,
          inputs: g.inputs.adapters.map((i) => i.id),
          version: VERSION,
          node: process.version,
          startup: startupProfile(startedAt, partMs),
        },
        'scan-gateway started',
      );
    },
    reload: (next) => reloadGateway(g, next, inputPartFor),
    reloadRefused(err) {
      g.live.lastReloadError = {
        message: err instanceof Error ? err.message : String(err),
        at: new Date(g.now()).toISOString(),
      };
    },
    // Cached: a second stop (a signal during a failed start's stop, say) waits for the first.
    stop: () => (stopping ??= stopAll(g)),
  };
}

/**
 * Where the start's time went, in ms since the process started (`performance.now()`): until the
 * entry module ran (`processMs`: the runtime's own start), loading the daemon's modules until the
 * configuration is read (`loadMs`), reading the configuration and secrets (`configMs`), building the
 * parts (`buildMs`) and each part's start (`parts`, by name). Read from the marks src/main.ts and the
 * run command set; a figure whose mark is missing (a test building the app directly) is left out.
 */
function startupProfile(
  startedAt: number,
  parts: Record<string, number>,
): Record<string, number | Record<string, number>> {
  const mark = (name: string) => performance.getEntriesByName(name, 'mark').at(-1)?.startTime;
  const [main, config, build] = [MARK_MAIN, MARK_CONFIG, MARK_BUILD].map(mark);
  const ms = (x: number) => Math.round(x * 10) / 10;
  return {
    ...(main !== undefined ? { processMs: ms(main) } : {}),
    ...(main !== undefined && config !== undefined ? { loadMs: ms(config - main) } : {}),
    ...(config !== undefined && build !== undefined ? { configMs: ms(build - config) } : {}),
    ...(build !== undefined ? { buildMs: ms(startedAt - build) } : {}),
    readyMs: ms(performance.now()),
    parts,
  };
}

/** Constructs every part of one gateway (no I/O; see {@link buildApp}). */
function buildGateway(loaded: LoadedConfig, deps: AppDeps): Gateway {
  const { config } = loaded;
  const logger = deps.logger;
  const now = deps.now ?? Date.now;
  const startedAt = new Date(now());
  const live: LiveState = {
    phase: 'starting',
    current: loaded,
    configLoadedAt: startedAt,
    mapper: new Mapper(config),
  };
  const inputs = new InputSet();
  const store = new BufferStore(config.buffer.path);
  const metrics: GatewayMetrics = new GatewayMetrics({
    status: () => (store.isOpen ? gatherStatus(g) : undefined),
    batchCounts: () => store.reports.batchCounts(),
    tokenRefreshes: () => api.tokenInfo?.().refreshes ?? 0,
  });
  const api: AppApi =
    deps.api ?? new UpstreamClient(clientOptionsFromConfig(config.upstream, loaded, logger));
  const bufferLog = logger.child({ component: 'buffer' });
  const backPressure = new BackPressure({
    store,
    // Without `buffer.maxBytes` the byte quota is derived from the disk at start (backPressurePart).
    limits: { ...config.buffer, maxBytes: config.buffer.maxBytes ?? DERIVED_QUOTA_MAX_BYTES },
    logger: bufferLog,
    now,
    onDiskFull: () => diskGuard.reportFull(),
    reserveReady: () => diskGuard.reserveReady(),
    onPausedChange: (paused, why) => inputs.setPaused(paused, why, logger),
  });
  const retention = new Retention({
    store,
    retentionDays: config.buffer.retentionDays,
    logger: logger.child({ component: 'retention' }),
    now,
  });
  const quota = config.buffer.maxBytes;
  const diskGuard: DiskGuard = new DiskGuard({
    store,
    retention,
    logger: bufferLog,
    now,
    keepRecentHours: config.buffer.earlyPruneKeepHours,
    ...(quota !== undefined
      ? { quotaBytes: quota }
      : {
          onDerivedQuota: (bytes: number, ceilingBytes: number) =>
            backPressure.setByteQuota(bytes, ceilingBytes),
        }),
  });
  const ha: HaParts | undefined = config.ha
    ? (() => {
        const etcd = EtcdClient.fromConfig(config.ha);
        return {
          etcd,
          leadership: new Leadership({
            etcd,
            nodeId: config.ha.nodeId,
            key: config.ha.key,
            leaseTtlMs: config.ha.leaseTtlMs,
            logger,
            now,
          }),
        };
      })()
    : undefined;
  const intake = new Intake({
    store,
    ...(ha
      ? {
          fence: {
            mayTake: () => ha.leadership.mayTake(),
            epoch: () => ha.leadership.epoch(),
            commitFailed: (err: unknown) =>
              ha.leadership.giveUp(`the buffer could not be written: ${(err as Error).message}`),
          },
        }
      : {}),
    mapping: live.mapper,
    logger: logger.child({ component: 'intake' }),
    now,
    onScansCommitted: () => deliverer.wake(),
    gate: backPressure,
    ...(deps.scrub ? { scrub: deps.scrub } : {}),
  });
  // The embedded sandbox follows the site: the configuration's DCPs and product keys, unless listed.
  const sandbox = config.sandbox.enabled
    ? new SandboxPart(config.sandbox, logger, {
        clientId: config.upstream.clientId,
        clientSecret: loaded.clientSecret,
        dcps: config.sandbox.dcps ?? config.dcps.map((d) => d.key),
        products: config.sandbox.products ?? live.mapper.productKeyUses().map((u) => u.key),
      })
    : undefined;
  const sftp = config.upstream.sftp
    ? new SftpRoute(config, config.upstream.sftp, deps.env ?? {})
    : undefined;
  const statusEvents = config.upstream.statusEvents.enabled
    ? statusEventsPart(loaded, store, sandbox, logger, now, () => deliverer)
    : undefined;
  const deliverer: Deliverer = new Deliverer({
    store,
    api: instrumentDeliveryApi(api, metrics),
    config: config.delivery,
    logger: logger.child({ component: 'delivery' }),
    now,
    onDiskFull: (err) => backPressure.diskFullSeen(err),
    // Status events start in the ready phase: until then (and when off) polling keeps its normal pace.
    pollPace: () => statusEvents?.feed.pace() ?? { events: false, safetyPollMs: 0 },
    onUploaded: () => statusEvents?.feed.batchUploaded(),
    ...(sftp ? { sftp: sftp.route() } : {}),
  });
  const productCheck = new ProductCheckPart(() => {
    const lister = api as Partial<{ listProducts: () => Promise<ReadonlyArray<{ key: string }>> }>;
    const settings = live.current.config.productCheck;
    if (!settings.enabled || typeof lister.listProducts !== 'function') return undefined;
    return new ProductCheck({
      listProducts: () => lister.listProducts!(),
      configuredKeys: () => live.mapper.productKeyUses(),
      observedKeys: () => live.mapper.observedProductKeys(),
      onProducts: (keys, at) => live.mapper.setKnownProducts(keys, at),
      intervalMs: settings.intervalMs,
      rejectUnknown: settings.rejectUnknown,
      logger: logger.child({ component: 'products' }),
      now,
    });
  });
  const listenerTls = config.http.tls
    ? new ListenerTls({ tls: config.http.tls, logger, now })
    : undefined;
  // The will waits three lease times: a standby resumes the shared session within about one, and
  // the broker then drops the old leader's `offline`.
  const haInput =
    ha && config.ha
      ? {
          ha: {
            mayConnect: () => ha.leadership.mayTake() === undefined,
            willDelaySec: Math.ceil((3 * config.ha.leaseTtlMs) / 1000),
          },
        }
      : {};
  const createInput: InputFactory =
    deps.createInput ??
    ((c, s, l) => defaultInput(c, s, l, { env: deps.env, scrub: deps.scrub, now, ...haInput }));
  const g: Gateway = {
    config,
    deps,
    logger,
    now,
    startedAt,
    store,
    sandbox,
    api,
    backPressure,
    retention,
    diskGuard,
    intake,
    deliverer,
    sftp,
    statusEvents,
    productCheck,
    inputs,
    createInput,
    ha,
    http: new HttpPart(config.http.listen, () => buildHttpServer(g), listenerTls),
    listenerTls,
    metrics,
    adminActions: buildAdminActions({
      store: () => (store.isOpen ? store : undefined),
      deliverer: () => deliverer,
      config: () => live.current.config,
      now,
    }),
    live,
    running: [],
  };
  return g;
}

/** The status-event part (contract §6), its feed applying events through the deliverer. */
function statusEventsPart(
  loaded: LoadedConfig,
  store: BufferStore,
  sandbox: SandboxPart | undefined,
  logger: AppDeps['logger'],
  now: () => number,
  deliverer: () => Deliverer,
): StatusEventsPart {
  const { upstream } = loaded.config;
  const settings = upstream.statusEvents;
  const topic = statusEventTopic(upstream);
  const log = logger.child({ component: 'status-events' });
  return new StatusEventsPart(
    {
      settings,
      topic,
      clientId: upstream.clientId,
      clientSecret: loaded.clientSecret,
      sandbox,
      logger: log,
    },
    (connect) =>
      new StatusEventFeed({
        store,
        topic,
        connect,
        apply: (ref, status, source) => deliverer().applyStatus(ref, status, source),
        onPaceChange: () => deliverer().wake(),
        safetyPollMs: settings.safetyPollMs,
        maxLagEvents: settings.maxLagEvents,
        staleAfterMs: settings.staleAfterMs,
        logger: log,
        now,
      }),
  );
}

/** Stops the running components in reverse order, each even when an earlier one failed; rejects naming those that failed. */
async function stopAll(g: Gateway): Promise<void> {
  g.live.phase = 'stopping';
  const failures: string[] = [];
  for (const part of g.running.reverse()) {
    try {
      await part.stop();
    } catch (err) {
      failures.push(part.name);
      g.logger.error({ component: 'app', err, part: part.name }, 'stopping a part failed');
    }
  }
  g.running.length = 0;
  if (failures.length > 0)
    throw new GatewayError(ErrorCodes.STOP, `stopping failed: ${failures.join(', ')}`);
}
