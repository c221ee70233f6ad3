import { isDeepStrictEqual } from 'node:util';
import type { FastifyInstance } from 'fastify';
import type { LoadedConfig } from './config/load.js';
import type { InputConfig } from './config/schema.js';
import { Deliverer } from './delivery/deliverer.js';
import type { DeliveryApi } from './delivery/types.js';
import { BufferStore } from './buffer/store.js';
import { Intake } from './buffer/intake.js';
import { BackPressure } from './buffer/back-pressure.js';
import { Retention } from './buffer/retention.js';
import { isLoopbackHost } from './health/host-check.js';
import { buildHealthServer, type GatewayStatus } from './health/server.js';
import { availableActions } from './health/admin.js';
import { buildAdminActions } from './health/admin-actions.js';
import { batchCounts, batchView, bufferFileBytes, printableRaw, recentActivity, stuckBatches } from './health/buffer-report.js';
import { deriveHealth, HEALTH_THRESHOLDS } from './health/derive.js';
import { GatewayMetrics, instrumentDeliveryApi } from './health/metrics.js';
import { FilesInput } from './inputs/files/files-input.js';
import { SerialInput } from './inputs/serial/serial-input.js';
import { HttpIngestInput, registerInputRoutes } from './inputs/http/http-input.js';
import { MqttInput } from './inputs/mqtt/mqtt-input.js';
import { TcpInput } from './inputs/tcp/tcp-input.js';
import type { InputAdapter, IntakeSink } from './inputs/types.js';
import type { Logger } from './log.js';
import { Mapper } from './mapping/mapper.js';
import { ProductCheck } from './mapping/product-check.js';
import { applyReload, planReload, RESTART_SECTIONS, type ReloadReport } from './config/reload.js';
import { VERSION } from './paths.js';
import { startSandbox, type RunningSandbox } from './sandbox/server.js';
import { UpstreamClient, clientOptionsFromConfig } from './upstream/client.js';
import { ErrorCodes, GatewayError } from './errors.js';

export interface AppDeps {
  logger: Logger;
  now?: () => number;
  /** Builds the adapter for one input; the default knows every `type` of the schema. */
  createInput?: (config: InputConfig, sink: IntakeSink, logger: Logger) => InputAdapter;
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
   * health page, `failed/*.error.txt`, reasons stored in the buffer (the log's scrubber, issue 11).
   */
  scrub?: (text: string) => string;
  /** Longest a stop waits for an upload in flight, in ms (default {@link DELIVERY_STOP_GRACE_MS}). */
  deliveryStopGraceMs?: number;
}

export interface App {
  start(): Promise<void>;
  /** Stops in reverse order; every part is stopped even when one fails. Rejects when any failed. */
  stop(): Promise<void>;
  status(): GatewayStatus;
  /** Address the local HTTP server listens on, once started. */
  readonly httpUrl: string | undefined;
  /**
   * Applies a new, valid configuration while running (SIGHUP, file change): the mapping at once,
   * inputs whose settings changed are restarted, the others run on. Sections that need a restart
   * are reported in the answer and on the status. See src/config/reload.ts.
   */
  reload(loaded: LoadedConfig): Promise<ReloadReport>;
  /** Records a configuration that could not be loaded or applied: the running one stays; shown on the status. */
  reloadRefused(err: unknown): void;
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

function defaultInput(config: InputConfig, sink: IntakeSink, logger: Logger, env: Record<string, string | undefined> = {}, scrub?: (text: string) => string): InputAdapter {
  switch (config.type) {
    case 'files':
      return new FilesInput({ config, sink, logger, ...(scrub ? { scrub } : {}) });
    case 'serial':
      return new SerialInput({ config, sink, logger });
    case 'mqtt':
      return new MqttInput({ config, sink, logger, env });
    case 'tcp':
      return new TcpInput({ config, sink, logger });
    case 'http':
      return new HttpIngestInput({ config, sink, logger, env });
  }
}

/**
 * Wires the gateway: buffer → (embedded sandbox) → upstream client → intake → delivery → inputs →
 * local HTTP server. Wiring only; every behaviour lives in the parts.
 */
export function buildApp(loaded: LoadedConfig, deps: AppDeps): App {
  const { config } = loaded;
  const logger = deps.logger;
  const now = deps.now ?? Date.now;
  const create = deps.createInput ?? ((c: InputConfig, s: IntakeSink, l: Logger) => defaultInput(c, s, l, deps.env, deps.scrub));
  const startedAt = new Date(now());
  let store: BufferStore | undefined;
  let sandbox: RunningSandbox | undefined;
  let api: AppDeps['api'];
  let intake: Intake | undefined;
  let deliverer: Deliverer | undefined;
  let backPressure: BackPressure | undefined;
  let retention: Retention | undefined;
  let http: FastifyInstance | undefined;
  let httpUrl: string | undefined;
  const inputs: InputAdapter[] = [];
  const stops: { name: string; stop: () => Promise<void> | void }[] = [];
  let phase: 'starting' | 'running' | 'stopping' = 'starting';
  // Configuration reload (issue 6): what runs now, and how the last reload went.
  let current = loaded;
  let mapper: Mapper | undefined;
  let productCheck: ProductCheck | undefined;
  let configLoadedAt = startedAt;
  let lastReload: { at: string; needsRestart: string[]; inputErrors: ReloadReport['inputErrors'] } | undefined;
  let lastReloadError: { message: string; at: string } | undefined;
  const startProductCheck = () => {
    const lister = api as Partial<{ listProducts: () => Promise<ReadonlyArray<{ key: string }>> }> | undefined;
    const settings = current.config.productCheck;
    if (!settings.enabled || typeof lister?.listProducts !== 'function') return;
    productCheck = new ProductCheck({
      listProducts: () => lister.listProducts!(),
      configuredKeys: () => mapper?.productKeyUses() ?? [],
      observedKeys: () => mapper?.observedProductKeys() ?? [],
      onProducts: (keys, at) => mapper?.setKnownProducts(keys, at),
      intervalMs: settings.intervalMs,
      rejectUnknown: settings.rejectUnknown,
      logger: logger.child({ component: 'products' }),
      now,
    });
    productCheck.start();
  };
  const metrics = new GatewayMetrics({
    status: () => (store?.db.open ? status() : undefined),
    batchCounts: () => batchCounts(store!.db),
    tokenRefreshes: () => api?.tokenInfo?.().refreshes ?? 0,
  });
  const adminActions = buildAdminActions({ store: () => store, deliverer: () => deliverer, config: () => current.config, now });

  const status = (): GatewayStatus => {
    const s = store!;
    const totals = s.totals();
    const counts = s.scanCounts();
    const deliveryStatus = deliverer?.snapshot();
    const lastUpload = s.lastUploadAt();
    const oldestUndelivered = s.oldestUndeliveredCreatedAt();
    const oldestPendingAgeMs = oldestUndelivered === null ? null : Math.max(0, now() - oldestUndelivered);
    const inputStatuses = inputs.map((i) => ({ ...i.status(), counters: intake!.countersFor(i.id) }));
    const products = productCheck?.snapshot();
    const quota = backPressure?.snapshot();
    const recent = recentActivity(s.db, now() - HEALTH_THRESHOLDS.windowMs);
    // Every signal to one pure function (src/health/derive.ts); this only gathers them.
    const health = deriveHealth({
      inputs: inputStatuses,
      ...(deliveryStatus ? { delivery: deliveryStatus } : {}),
      buffer: {
        waitingScans: totals.undeliveredScans,
        oldestWaitingAgeMs: oldestPendingAgeMs,
        heldScans: counts.held ?? 0,
        failedScans: counts.failed ?? 0,
        commitError: intake?.lastCommitError,
        quota,
      },
      recent,
      stuckBatches: stuckBatches(s.db, now() - HEALTH_THRESHOLDS.stuckBatchMs),
      products,
      config: { lastReloadError, needsRestart: lastReload?.needsRestart },
    });
    const token = api?.tokenInfo?.();
    return {
      state: health.state,
      reasons: health.problems.filter((p) => p.severity !== 'info').map((p) => p.sentence),
      healthProblems: health.problems,
      recent: {
        windowMs: HEALTH_THRESHOLDS.windowMs,
        reads: recent.reads,
        rejections: recent.rejections,
        filesRefused: recent.filesRefusedCount,
        failedScans: recent.failedScans,
      },
      phase,
      generatedAt: new Date(now()).toISOString(),
      site: current.config.site,
      version: VERSION,
      startedAt: startedAt.toISOString(),
      uptimeSec: Math.round((now() - startedAt.getTime()) / 1000),
      config: {
        file: current.file,
        loadedAt: configLoadedAt.toISOString(),
        ...(lastReload ? { lastReload } : {}),
        ...(lastReloadError ? { lastReloadError } : {}),
      },
      sessions: (mapper?.openContainers(now()) ?? []).map((c) => ({ ...c })),
      ...(products ? { products } : {}),
      buffer: {
        path: config.buffer.path,
        pendingScans: totals.pendingScans,
        undeliveredScans: totals.undeliveredScans,
        heldScans: counts.held ?? 0,
        oldestPendingAgeMs,
        scans: counts,
        fileBytes: bufferFileBytes(config.buffer.path),
        ...(intake?.lastCommitError ? { lastCommitError: intake.lastCommitError } : {}),
        ...(quota
          ? { quotaScans: quota.maxPendingScans, quotaBytes: quota.maxBytes, undeliveredBytes: quota.undeliveredBytes, intakePaused: quota.intakePaused, quota }
          : {}),
        ...(retention?.lastRun ? { lastPrune: retention.lastRun } : {}),
      },
      delivery: {
        mode: config.delivery.mode,
        ...deliveryStatus,
        ...(lastUpload ? { lastSuccessAt: lastUpload } : {}),
        ...(token ? { token: { ...(token.expiresAt ? { expiresAt: new Date(token.expiresAt).toISOString() } : {}), refreshes: token.refreshes } } : {}),
      },
      inputs: inputStatuses,
      batches: s.recentBatches(20).map(batchView),
      problems: s.recentProblems(20).map((p) => ({ ...p, raw: printableRaw(p.raw) })),
      admin: { enabled: deps.adminToken !== undefined, actions: availableActions({ token: deps.adminToken, actions: adminActions }) },
    };
  };

  return {
    get httpUrl() {
      return httpUrl;
    },
    status,
    async start() {
      store = new BufferStore(config.buffer.path);
      stops.push({ name: 'buffer', stop: () => store?.close() });
      if (config.sandbox.enabled) {
        const { host, port } = splitListen(config.sandbox.listen);
        sandbox = await listening('sandbox.listen', config.sandbox.listen, () => startSandbox({ host, port, logger }));
        stops.push({ name: 'sandbox', stop: () => sandbox?.close() });
        logger.info({ component: 'app', url: sandbox.url }, 'embedded upstream sandbox started');
      }
      api =
        deps.api ??
new UpstreamClient(clientOptionsFromConfig(config.upstream, loaded, logger));
      // Bounded: undici's close waits for requests in flight, and an abandoned upload may still hang.
      stops.push({ name: 'upstream', stop: async () => void (await within(UPSTREAM_CLOSE_GRACE_MS, api?.close?.())) });
      backPressure = new BackPressure({
        store,
        limits: config.buffer,
        logger: logger.child({ component: 'buffer' }),
        now,
        onPausedChange: (paused, why) => {
          for (const input of inputs) {
            if (!input.setPaused) continue;
            input.setPaused(paused);
            (paused ? logger.warn.bind(logger) : logger.info.bind(logger))({ component: 'buffer', input: input.id, paused, why }, paused ? 'input paused by back-pressure' : 'input resumed');
          }
        },
      });
      backPressure.start();
      stops.push({ name: 'back-pressure', stop: () => backPressure?.stop() });
      retention = new Retention({ store, retentionDays: config.buffer.retentionDays, logger: logger.child({ component: 'retention' }), now });
      retention.start();
      stops.push({ name: 'retention', stop: () => retention?.stop() });
      deliverer = new Deliverer({ store, api: instrumentDeliveryApi(api, metrics), config: config.delivery, logger: logger.child({ component: 'delivery' }), now });
      intake = new Intake({
        store,
        mapping: (mapper = new Mapper(config)),
        logger: logger.child({ component: 'intake' }),
        now,
        onScansCommitted: () => deliverer?.wake(),
        gate: backPressure,
        ...(deps.scrub ? { scrub: deps.scrub } : {}),
      });
      stops.push({ name: 'intake', stop: () => intake?.close() });
      deliverer.start();
      startProductCheck();
      stops.push({ name: 'product check', stop: () => productCheck?.stop() });
      stops.push({
        name: 'delivery',
        stop: async () => {
          const graceMs = deps.deliveryStopGraceMs ?? DELIVERY_STOP_GRACE_MS;
          if (await within(graceMs, deliverer?.stop())) return;
          // The batch stays `uploading`/`presigned` in the buffer: the next start sends it again as a
          // possible duplicate (direct) or asks the service about its requestId first (pre-signed).
          logger.warn({ component: 'delivery', graceMs }, 'an upload was still in flight at the stop; abandoned, recovered at the next start');
        },
      });
      for (const inputConfig of config.inputs) {
        const input = create(inputConfig, intake, logger);
        inputs.push(input);
        stops.push({ name: `input ${input.id}`, stop: () => input.stop() });
        await input.start();
        // Started while the buffer is near its quota (or the disk full): pause it at once.
        if (backPressure.snapshot().intakePaused) input.setPaused?.(true);
      }
      const { host, port } = splitListen(config.http.listen);
      http = buildHealthServer({
        logger,
        status,
        metrics,
        admin: { token: deps.adminToken, actions: adminActions },
        limits: config.http.limits,
        listenHost: host,
        allowedHosts: config.http.allowedHosts,
        readToken: deps.readToken,
        ...(deps.scrub ? { scrub: deps.scrub } : {}),
      });
      await registerInputRoutes(http, () => inputs);
      if (!isLoopbackHost(host) && deps.readToken === undefined) {
        logger.warn(
          { component: 'http', listen: config.http.listen },
          'http.listen is not loopback and no read token is configured: anyone who can reach it reads the health page, the status (DCPs, inputs, recent problems) and the metrics; set http.readTokenFile or SCAN_GATEWAY_READ_TOKEN (docs/operations.md)',
        );
      }
      const server = http;
      httpUrl = await listening('http.listen', config.http.listen, () => server.listen({ host, port }));
      stops.push({ name: 'http', stop: () => http?.close() });
      phase = 'running';
      logger.info({ component: 'app', http: httpUrl, inputs: inputs.map((i) => i.id) }, 'scan-gateway started');
    },
    async reload(next) {
      const plan = planReload(current.config, next.config);
      const report = await applyReload(plan, next.config, {
        stopInput: async (id) => {
          const at = inputs.findIndex((i) => i.id === id);
          if (at < 0) return;
          const [input] = inputs.splice(at, 1);
          const entry = stops.findIndex((s) => s.name === `input ${id}`);
          if (entry >= 0) stops.splice(entry, 1);
          await input!.stop();
        },
        startInput: async (inputConfig) => {
          const input = create(inputConfig, intake!, logger);
          inputs.push(input);
          stops.push({ name: `input ${input.id}`, stop: () => input.stop() });
          await input.start();
          if (backPressure?.snapshot().intakePaused) input.setPaused?.(true);
        },
        swapMapping: () => {
          const fresh = new Mapper(next.config);
          if (mapper) fresh.adoptSessions(mapper);
          const known = productCheck?.knownProducts();
          if (known) fresh.setKnownProducts(known.keys, known.at);
          mapper = fresh;
          intake?.setMapping(fresh);
        },
      });
      // What runs: the new file, except the sections that only a restart applies. The next reload
      // compares with this, so needsRestart stays listed until the file matches what runs again.
      const previous = current;
      const running = Object.fromEntries(RESTART_SECTIONS.map((section) => [section, current.config[section]]));
      current = { ...next, config: { ...next.config, ...running } };
      configLoadedAt = new Date(now());
      lastReloadError = undefined;
      lastReload = { at: configLoadedAt.toISOString(), needsRestart: report.needsRestart, inputErrors: report.inputErrors };
      if (report.productCheckChanged) {
        productCheck?.stop();
        productCheck = undefined;
        startProductCheck();
      }
      const log = logger.child({ component: 'config' });
      log.info(
        {
          file: next.file,
          restarted: report.changed,
          added: report.added,
          removed: report.removed,
          unchanged: report.unchanged,
          // The mapping is swapped on every reload; say whether what it maps by changed.
          mappingChanged: !isDeepStrictEqual(
            { dcps: previous.config.dcps, rules: previous.config.rules, lookups: previous.config.lookups, containers: previous.config.containers, site: previous.config.site },
            { dcps: next.config.dcps, rules: next.config.rules, lookups: next.config.lookups, containers: next.config.containers, site: next.config.site },
          ),
        },
        'configuration reloaded',
      );
      if (report.needsRestart.length > 0) log.warn({ sections: report.needsRestart }, 'changed sections take effect only after a restart');
      for (const e of report.inputErrors) log.error({ input: e.id }, `input after reload: ${e.message}`);
      return report;
    },
    reloadRefused(err) {
      lastReloadError = { message: err instanceof Error ? err.message : String(err), at: new Date(now()).toISOString() };
    },
    async stop() {
      phase = 'stopping';
      const failures: string[] = [];
      for (const part of stops.reverse()) {
        try {
          await part.stop();
        } catch (err) {
          failures.push(part.name);
          logger.error({ component: 'app', err, part: part.name }, 'stopping a part failed');
        }
      }
      stops.length = 0;
      if (failures.length > 0) throw new GatewayError(ErrorCodes.STOP, `stopping failed: ${failures.join(', ')}`);
    },
  };
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
