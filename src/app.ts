import { ErrorCodes, GatewayError, isGatewayError } from './errors.js';
import { BackPressure } from './buffer/back-pressure.js';
import { DERIVED_QUOTA_MAX_BYTES, DiskGuard } from './buffer/disk-guard.js';
import { Intake } from './intake/intake.js';
import { Retention } from './buffer/retention.js';
import { BufferStore } from './buffer/store.js';
import { BufferQueries } from './queries/queries.js';
import type { LoadedConfig } from './config/load.js';
import type { ReloadReport } from './config/reload.js';
import { Deliverer } from './delivery/deliverer.js';
import { buildAdminActions } from './health/admin-actions.js';
import { GatewayMetrics, instrumentDeliveryApi } from './health/metrics.js';
import type { GatewayStatus } from './health/server.js';
import { ListenerTls } from './listener/listener-tls.js';
import { RotatingToken } from './listener/rotating-token.js';
import { Mapper } from './mapping/mapper.js';
import { ProductCheck } from './mapping/product-check.js';
import { MARK_BUILD, MARK_CONFIG, MARK_MAIN, VERSION } from './paths.js';
import { UpstreamClient, clientOptionsFromConfig } from './upstream/client.js';
import {
  DELIVERY_STOP_GRACE_MS,
  type AppApi,
  type AppDeps,
  type Gateway,
  type LiveState,
} from './app/gateway.js';
import type { HttpServerParts } from './app/http.js';
import type { RouteEntry } from './listener/route-guard.js';
import { defaultInput, InputSupervisor, type InputFactory } from './app/inputs.js';
import type { Component } from './app/parts.js';
import {
  backPressurePart,
  bufferPart,
  diskGuardPart,
  intakePart,
  timerPart,
} from './app/buffer-parts.js';
import { SandboxPart } from './app/sandbox-part.js';
import { deliveryPart, SftpRoute, upstreamPart } from './app/delivery-parts.js';
import { statusEventsPart } from './app/status-events-part.js';
import { ProductCheckPart } from './app/product-check-part.js';
import { HttpPart } from './app/http-part.js';
import { reloadGateway, type ReloadedTokens } from './app/reload.js';
import { HaPart, type HaParts } from './app/ha-part.js';
import { EtcdClient } from './ha/etcd-client.js';
import { Leadership } from './ha/leadership.js';
import { gatherStatus, probeChangeKey, type StatusParts } from './app/status.js';
import { Later } from './app/later.js';

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
  reload(loaded: LoadedConfig, tokens?: ReloadedTokens): Promise<ReloadReport>;
  /** Records a configuration that could not be loaded or applied: the running one stays; shown on the status. */
  reloadRefused(err: unknown): void;
}

/**
 * Builds the gateway: every part is constructed here, with its dependencies, and none does I/O
 * until `start()`. Its list of parts below is the start order (the one place it is written), then
 * the `ready` phase. Wiring only; every behaviour lives in the parts, the status in
 * src/health/compose-status.ts.
 *
 * @throws GatewayError `CONFIG` for an upstream address the client refuses (plain http off
 *   loopback without `allowInsecureHttp`, a proxy URL with credentials), as `UpstreamClient` does.
 */
export function buildApp(loaded: LoadedConfig, deps: AppDeps): App {
  const g = buildGateway(loaded, deps);
  // The start order. What each start does: the buffer opens and migrates the SQLite file; the
  // sandbox listens; back-pressure derives the byte quota from the disk; the disk guard writes its
  // reserve; intake restores the duplicate window; delivery reads the SFTP login; status events
  // read their CA (their reader starts at `ready`); each input loads its module and connects or
  // listens; the product check fetches the product list; the HTTP server listens last, once the
  // ingest routes are known.
  const parts: Component[] = [
    bufferPart(g.store, g.queries),
    ...(g.sandbox ? [g.sandbox] : []),
    upstreamPart(g.api),
    backPressurePart(g.backPressure, g.config.buffer, g.logger),
    timerPart('retention', g.retention),
    diskGuardPart(g.diskGuard),
    intakePart({
      open: () => {
        g.intake.open();
        // Open containers go on across a restart with their count (the buffer keeps them).
        const restored = g.live.mapper.restoreContainers(g.store.containers.open());
        if (restored > 0) g.logger.info({ containers: restored }, 'open containers restored');
      },
      close: () => g.intake.close(),
    }),
    deliveryPart(g.deliverer, g.sftp, deps.deliveryStopGraceMs ?? DELIVERY_STOP_GRACE_MS, g.logger),
    ...(g.statusEvents ? [g.statusEvents] : []),
    // Under `ha` the inputs run only while this node leads: the HA part starts and stops them.
    ...(g.ha ? [new HaPart(g, g.ha)] : [g.inputs]),
    // After the inputs: its first fetch loads the HTTP client (undici, a third of the modules'
    // loading), which would otherwise run before the ports open; the fetch is a round trip to the
    // service either way, so the list arrives no later than before.
    g.productCheck,
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
    reload: (next, tokens) => reloadGateway(g, next, tokens),
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

/**
 * Constructs every part of one gateway (no I/O; see {@link buildApp}), each after the parts it
 * uses. Where two parts call each other, the earlier one reaches the later through a {@link Later}
 * bound as soon as the later one exists: the disk guard (back-pressure tells it of a full disk),
 * delivery (status events apply through it) and the status (the metrics read it).
 */
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
  const store = new BufferStore(config.buffer.path);
  const queries = new BufferQueries(store);
  const api: AppApi =
    deps.api ?? new UpstreamClient(clientOptionsFromConfig(config.upstream, loaded, logger));
  const status = new Later<StatusParts>('the status');
  const supervisor = new Later<InputSupervisor>('the inputs');
  const metrics = new GatewayMetrics({
    status: () => (store.isOpen ? gatherStatus(status.get()) : undefined),
    batchCounts: () => queries.reports.batchCounts(),
    containerCounts: () => store.containers.countsByState(),
    tokenRefreshes: () => api.tokenInfo?.().refreshes ?? 0,
  });
  const bufferLog = logger.child({ component: 'buffer' });
  const guard = new Later<DiskGuard>('the disk guard');
  const backPressure = new BackPressure({
    store,
    // Without `buffer.maxBytes` the byte quota is derived from the disk at start (backPressurePart).
    limits: { ...config.buffer, maxBytes: config.buffer.maxBytes ?? DERIVED_QUOTA_MAX_BYTES },
    logger: bufferLog,
    now,
    onDiskFull: () => guard.get().reportFull(),
    reserveReady: () => guard.get().reserveReady(),
    onPausedChange: (paused, why) => supervisor.get().setPaused(paused, why, logger),
  });
  const retention = new Retention({
    store,
    retentionDays: config.buffer.retentionDays,
    logger: logger.child({ component: 'retention' }),
    now,
  });
  const quota = config.buffer.maxBytes;
  const diskGuard = guard.bind(
    new DiskGuard({
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
    }),
  );
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
  const delivery = new Later<Deliverer>('delivery');
  const statusEvents = config.upstream.statusEvents.enabled
    ? statusEventsPart(
        loaded,
        () => live.current,
        store,
        sandbox,
        logger,
        now,
        () => delivery.get(),
      )
    : undefined;
  const deliverer = delivery.bind(
    new Deliverer({
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
    }),
  );
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
  const productCheck = new ProductCheckPart(() => {
    const settings = live.current.config.productCheck;
    const listProducts = api.listProducts?.bind(api);
    if (!settings.enabled || !listProducts) return undefined;
    return new ProductCheck({
      listProducts,
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
  const haInput = ha ? { ha: ha.leadership.inputHandover() } : {};
  const createInput: InputFactory =
    deps.createInput ??
    ((c, s, l) => defaultInput(c, s, l, { env: deps.env, scrub: deps.scrub, now, ...haInput }));
  // The one owner of the running inputs: started as a part, or by `ha` on taking over.
  const inputs = supervisor.bind(
    new InputSupervisor({
      configured: config.inputs,
      create: createInput,
      sink: intake,
      intakePaused: () => backPressure.snapshot().intakePaused,
      logger,
    }),
  );
  const adminActions = buildAdminActions({
    store: () => (store.isOpen ? store : undefined),
    deliverer: () => deliverer,
    config: () => live.current.config,
    mapper: () => live.mapper,
    now,
  });
  // The local server's admin and read tokens: a reload replaces them (src/listener/rotating-token.ts).
  const serverTokens = {
    admin: new RotatingToken(deps.adminToken, now),
    read: new RotatingToken(deps.readToken, now),
  };
  const statusParts = status.bind({
    serverTokens,
    now,
    startedAt,
    live,
    config,
    deps,
    store,
    queries,
    inputs,
    intake,
    backPressure,
    retention,
    diskGuard,
    deliverer,
    api,
    statusEvents,
    productCheck,
    adminActions,
    listenerTls,
    ha,
  });
  const httpParts: HttpServerParts = {
    serverTokens,
    config,
    deps,
    logger,
    live,
    now,
    queries,
    metrics,
    adminActions,
    listenerTls,
    status: () => gatherStatus(statusParts),
    probeChangeKey: () => probeChangeKey(statusParts),
    underHa: ha !== undefined,
    createInput,
    intake,
    inputs,
  };
  // Loaded when the HTTP part starts (the last part): fastify and the routes' modules are not
  // loaded before the inputs open, and a start that fails earlier never loads them.
  const http = new HttpPart(
    config.http.listen,
    async () => (await import('./app/http.js')).buildHttpServer(httpParts),
    listenerTls,
  );
  return {
    config,
    deps,
    logger,
    now,
    startedAt,
    store,
    queries,
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
    http,
    listenerTls,
    serverTokens,
    metrics,
    adminActions,
    live,
    running: [],
  };
}

/** Stops the running components in reverse order, each even when an earlier one failed; rejects naming those that failed. */
async function stopAll(g: Gateway): Promise<void> {
  g.live.phase = 'stopping';
  const failures: string[] = [];
  // Reverse order, but delivery first: an upload in flight may take its grace (15 s) to finish,
  // and the inputs take reads meanwhile. They close after it, so the port of a restart is closed
  // only for the rest of the stop and the next start, not for that wait as well.
  const order = g.running.reverse();
  const delivery = order.findIndex((p) => p.name === 'delivery');
  if (delivery > 0) order.unshift(...order.splice(delivery, 1));
  for (const part of order) {
    try {
      await part.stop();
    } catch (err) {
      // The inputs' part names each input that failed (and logged it).
      const named = isGatewayError(err, ErrorCodes.STOP) ? err.details['parts'] : undefined;
      if (Array.isArray(named)) failures.push(...named.map(String));
      else {
        failures.push(part.name);
        g.logger.error({ component: 'app', err, part: part.name }, 'stopping a part failed');
      }
    }
  }
  g.running.length = 0;
  if (failures.length > 0)
    throw new GatewayError(ErrorCodes.STOP, `stopping failed: ${failures.join(', ')}`);
}
