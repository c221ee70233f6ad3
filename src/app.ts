import { ErrorCodes, GatewayError, isGatewayError } from './errors.js';
import type { LoadedConfig } from './config/load.js';
import type { ReloadReport } from './config/reload.js';
import type { GatewayStatus } from './health/server.js';
import { MARK_BUILD, MARK_CONFIG, MARK_MAIN, VERSION } from './paths.js';
import { DELIVERY_STOP_GRACE_MS, type AppDeps, type Gateway } from './app/gateway.js';
import type { RouteEntry } from './listener/route-guard.js';
import type { Component } from './app/parts.js';
import {
  backPressurePart,
  bufferPart,
  diskGuardPart,
  intakePart,
  timerPart,
} from './app/buffer-parts.js';
import { deliveryPart, upstreamPart } from './app/delivery-parts.js';
import { reloadGateway, type ReloadedTokens } from './app/reload.js';
import { HaPart } from './app/ha-part.js';
import { gatherStatus } from './app/status.js';
import { buildGateway } from './app/build-gateway.js';

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
  // listens; the HTTP server listens last, once the ingest routes are known.
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
    // Before the inputs, so the product list is asked for before the first read comes in: started
    // after them, a file's reads taken at start went up to the service with another outcome.
    g.productCheck,
    // Under `ha` the inputs run only while this node leads: the HA part starts and stops them.
    ...(g.ha ? [new HaPart(g, g.ha)] : [g.inputs]),
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
