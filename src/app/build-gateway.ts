import { BackPressure } from '../buffer/back-pressure.js';
import { DERIVED_QUOTA_MAX_BYTES, DiskGuard } from '../buffer/disk-guard.js';
import { Intake } from '../intake/intake.js';
import { Retention } from '../buffer/retention.js';
import { BufferStore } from '../buffer/store.js';
import { BufferQueries } from '../queries/queries.js';
import type { LoadedConfig } from '../config/load.js';
import { Deliverer } from '../delivery/deliverer.js';
import { buildAdminActions } from '../health/admin-actions.js';
import { GatewayMetrics, instrumentDeliveryApi } from '../health/metrics.js';
import { ListenerTls } from '../listener/listener-tls.js';
import { RotatingToken } from '../listener/rotating-token.js';
import { Mapper } from '../mapping/mapper.js';
import { ProductCheck } from '../mapping/product-check.js';
import { UpstreamClient, clientOptionsFromConfig } from '../upstream/client.js';
import { type AppApi, type AppDeps, type Gateway, type LiveState } from './gateway.js';
import type { HttpServerParts } from './http.js';
import { defaultInput, InputSupervisor, type InputFactory } from './inputs.js';
import { SandboxPart } from './sandbox-part.js';
import { SftpRoute } from './delivery-parts.js';
import { statusEventsPart } from './status-events-part.js';
import { ProductCheckPart } from './product-check-part.js';
import { HttpPart } from './http-part.js';
import { type HaParts } from './ha-part.js';
import { EtcdClient } from '../ha/etcd-client.js';
import { Leadership } from '../ha/leadership.js';
import { gatherStatus, probeChangeKey, type StatusParts } from './status.js';
import { Later } from './later.js';

/**
 * Constructs every part of one gateway (no I/O; see {@link buildApp}), each after the parts it
 * uses. Where two parts call each other, the earlier one reaches the later through a {@link Later}
 * bound as soon as the later one exists: the disk guard (back-pressure tells it of a full disk),
 * delivery (status events apply through it) and the status (the metrics read it).
 */
export function buildGateway(loaded: LoadedConfig, deps: AppDeps): Gateway {
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
    otherWriter: () => deliverer.threadWriting(),
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
    async () => (await import('./http.js')).buildHttpServer(httpParts),
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
