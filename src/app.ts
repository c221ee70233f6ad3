import { ErrorCodes, GatewayError } from './errors.js';
import { isDeepStrictEqual } from 'node:util';
import type { LoadedConfig } from './config/load.js';
import { applyReload, planReload, RESTART_SECTIONS, type ReloadReport } from './config/reload.js';
import { availableActions } from './health/admin.js';
import { buildAdminActions } from './health/admin-actions.js';
import { batchView } from './buffer/reports.js';
import { bufferFileBytes } from './buffer/disk-usage.js';
import { composeStatus } from './health/compose-status.js';
import { HEALTH_THRESHOLDS } from './health/derive.js';
import { GatewayMetrics } from './health/metrics.js';
import type { GatewayStatus } from './health/server.js';
import { Mapper } from './mapping/mapper.js';
import { VERSION } from './paths.js';
import {
  buildBackPressure,
  buildBuffer,
  buildDelivery,
  buildHttp,
  buildInput,
  buildIntake,
  buildProductCheck,
  buildRetention,
  buildDiskGuard,
  buildSandbox,
  buildStatusEvents,
  buildUpstream,
  defaultInput,
  startProductCheck,
  type AppDeps,
  type Component,
  type Wiring,
} from './app/parts.js';

export { DELIVERY_STOP_GRACE_MS, type AppDeps, type Component } from './app/parts.js';

export interface App {
  start(): Promise<void>;
  /**
   * Stops in reverse order; every part is stopped even when one fails. Rejects when any failed.
   * Runs once: a second call answers the first call's promise.
   */
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

/**
 * Wires the gateway: buffer → (embedded sandbox) → upstream client → back-pressure → retention →
 * intake → delivery → product check → inputs → local HTTP server. Wiring only; every behaviour
 * lives in the parts, the status in src/health/compose-status.ts.
 */
export function buildApp(loaded: LoadedConfig, deps: AppDeps): App {
  const now = deps.now ?? Date.now;
  const startedAt = new Date(now());
  const w: Wiring = {
    config: loaded.config,
    loaded,
    deps,
    logger: deps.logger,
    now,
    create: deps.createInput ?? ((c, s, l) => defaultInput(c, s, l, { env: deps.env, scrub: deps.scrub, now })),
    startedAt,
    metrics: new GatewayMetrics({
      status: () => (w.store?.isOpen ? gatherStatus(w) : undefined),
      batchCounts: () => w.store!.reports.batchCounts(),
      tokenRefreshes: () => w.api?.tokenInfo?.().refreshes ?? 0,
    }),
    status: () => gatherStatus(w),
    adminActions: buildAdminActions({ store: () => w.store, deliverer: () => w.deliverer, config: () => w.current.config, now }),
    phase: 'starting',
    current: loaded,
    configLoadedAt: startedAt,
    inputs: [],
    running: [],
  };
  const parts: Component[] = [
    buildBuffer(w),
    ...(w.config.sandbox.enabled ? [buildSandbox(w)] : []),
    buildUpstream(w),
    buildBackPressure(w),
    buildRetention(w),
    buildDiskGuard(w),
    buildIntake(w),
    buildDelivery(w),
    buildStatusEvents(w),
    buildProductCheck(w),
    ...w.config.inputs.map((c) => buildInput(w, c)),
    buildHttp(w),
  ];
  let stopping: Promise<void> | undefined;
  return {
    get httpUrl() {
      return w.httpUrl;
    },
    status: w.status,
    async start() {
      for (const part of parts) {
        w.running.push(part);
        await part.start();
      }
      w.phase = 'running';
      // The version and the runtime in the start line: a package carries its own Node.js, and a support
      // question starts with which one ran.
      w.logger.info({ component: 'app', http: w.httpUrl, inputs: w.inputs.map((i) => i.id), version: VERSION, node: process.version }, 'scan-gateway started');
    },
    reload: (next) => reloadApp(w, next),
    reloadRefused(err) {
      w.lastReloadError = { message: err instanceof Error ? err.message : String(err), at: new Date(now()).toISOString() };
    },
    // Cached: a second stop (a signal during a failed start's stop, say) waits for the first.
    stop: () => (stopping ??= stopAll(w)),
  };
}

/** Stops the running components in reverse order, each even when an earlier one failed; rejects naming those that failed. */
async function stopAll(w: Wiring): Promise<void> {
  w.phase = 'stopping';
  const failures: string[] = [];
  for (const part of w.running.reverse()) {
    try {
      await part.stop();
    } catch (err) {
      failures.push(part.name);
      w.logger.error({ component: 'app', err, part: part.name }, 'stopping a part failed');
    }
  }
  w.running.length = 0;
  if (failures.length > 0) throw new GatewayError(ErrorCodes.STOP, `stopping failed: ${failures.join(', ')}`);
}

/** The parts' snapshots at this instant, composed into the status by {@link composeStatus}. */
function gatherStatus(w: Wiring): GatewayStatus {
  const s = w.store!;
  const nowMs = w.now();
  const { current, config } = w;
  return composeStatus({
    nowMs,
    phase: w.phase,
    version: VERSION,
    site: current.config.site,
    startedAtMs: w.startedAt.getTime(),
    config: { file: current.file, loadedAt: w.configLoadedAt.toISOString(), lastReload: w.lastReload, lastReloadError: w.lastReloadError },
    inputs: w.inputs.map((i) => ({ ...i.status(), counters: w.intake!.countersFor(i.id) })),
    buffer: {
      path: config.buffer.path,
      totals: s.reports.totals(),
      scans: s.reports.scanCounts(),
      oldestUndeliveredCreatedAt: s.reports.oldestUndeliveredCreatedAt(),
      lastUploadAt: s.reports.lastUploadAt(),
      fileBytes: bufferFileBytes(config.buffer.path),
      commitError: w.intake?.lastCommitError,
      quota: w.backPressure?.snapshot(),
      lastPrune: w.retention?.lastRun,
      disk: w.diskGuard?.snapshot(),
      batches: s.reports.recentBatches(20).map(batchView),
      problems: s.reports.recentProblems(20),
    },
    recent: s.reports.recentActivity(nowMs - HEALTH_THRESHOLDS.windowMs),
    stuckBatches: s.reports.stuckBatches(nowMs - HEALTH_THRESHOLDS.stuckBatchMs),
    delivery: { mode: config.delivery.mode, snapshot: w.deliverer?.snapshot(), token: w.api?.tokenInfo?.() },
    statusEvents: w.statusEvents?.snapshot(),
    products: w.productCheck?.snapshot(),
    sessions: w.mapper?.openContainers(nowMs) ?? [],
    admin: { enabled: w.deps.adminToken !== undefined, actions: availableActions({ token: w.deps.adminToken, actions: w.adminActions }) },
  });
}

/**
 * Applies a new configuration while running (see {@link App.reload}): inputs restarted, added and
 * removed through the running list, the mapping swapped, the product check restarted when changed.
 */
async function reloadApp(w: Wiring, next: LoadedConfig): Promise<ReloadReport> {
  const report = await applyReload(planReload(w.current.config, next.config), next.config, {
    stopInput: async (id) => {
      const at = w.inputs.findIndex((i) => i.id === id);
      if (at < 0) return;
      const [input] = w.inputs.splice(at, 1);
      const entry = w.running.findIndex((s) => s.name === `input ${id}`);
      if (entry >= 0) w.running.splice(entry, 1);
      await input!.stop();
    },
    startInput: async (inputConfig) => {
      const part = buildInput(w, inputConfig);
      w.running.push(part);
      await part.start();
    },
    swapMapping: () => {
      const fresh = new Mapper(next.config);
      if (w.mapper) fresh.adoptSessions(w.mapper);
      const known = w.productCheck?.knownProducts();
      if (known) fresh.setKnownProducts(known.keys, known.at);
      w.mapper = fresh;
      w.intake?.setMapping(fresh);
    },
  });
  // What runs: the new file, except the sections that only a restart applies. The next reload
  // compares with this, so needsRestart stays listed until the file matches what runs again.
  const previous = w.current;
  const running = Object.fromEntries(RESTART_SECTIONS.map((section) => [section, previous.config[section]]));
  w.current = { ...next, config: { ...next.config, ...running } };
  w.configLoadedAt = new Date(w.now());
  delete w.lastReloadError;
  w.lastReload = { at: w.configLoadedAt.toISOString(), needsRestart: report.needsRestart, inputErrors: report.inputErrors };
  if (report.productCheckChanged) {
    w.productCheck?.stop();
    delete w.productCheck;
    startProductCheck(w);
  }
  const log = w.logger.child({ component: 'config' });
  const mappedBy = (c: LoadedConfig['config']) => ({ dcps: c.dcps, rules: c.rules, lookups: c.lookups, containers: c.containers, site: c.site });
  log.info(
    {
      file: next.file,
      restarted: report.changed,
      added: report.added,
      removed: report.removed,
      unchanged: report.unchanged,
      // The mapping is swapped on every reload; say whether what it maps by changed.
      mappingChanged: !isDeepStrictEqual(mappedBy(previous.config), mappedBy(next.config)),
    },
    'configuration reloaded',
  );
  if (report.needsRestart.length > 0) log.warn({ sections: report.needsRestart }, 'changed sections take effect only after a restart');
  for (const e of report.inputErrors) log.error({ input: e.id }, `input after reload: ${e.message}`);
  return report;
}
