import type { FastifyInstance } from 'fastify';
import { isLoopbackHost } from '../listener/host-check.js';
import { gatewayInstanceId } from '../config/own-gateway.js';
import { buildHealthServer } from '../health/server.js';
import { answerItemQuestion, type ItemQuestion } from '../queries/item-questions.js';
import { LookupWorkers } from '../queries/lookup-workers.js';
import type { AppDeps, Gateway, LiveState } from './gateway.js';
import type { InputFactory } from './inputs.js';
import { inputKind } from '../inputs/registry.js';
import { splitListen } from './part-helpers.js';
import { tokensInClear } from './tokens-in-clear.js';
import type { GatewayConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';
import type { BufferQueries } from '../queries/queries.js';
import type { GatewayMetrics } from '../health/metrics.js';
import type { AdminActions } from '../health/admin.js';
import type { GatewayStatus } from '../health/server.js';
import type { ListenerTls } from '../listener/listener-tls.js';
import type { InputAdapter, IntakeSink } from '../inputs/types.js';

/** What the local HTTP server is built from: the status as a function, the reports, and the inputs whose routes it serves. */
export interface HttpServerParts {
  readonly config: Pick<GatewayConfig, 'http' | 'buffer' | 'inputs'>;
  readonly deps: Pick<AppDeps, 'adminToken' | 'readToken' | 'scrub'>;
  readonly serverTokens: Gateway['serverTokens'];
  readonly logger: Logger;
  readonly live: Pick<LiveState, 'current' | 'mapper'>;
  readonly now: Clock;
  readonly queries: Pick<BufferQueries, 'reports'>;
  readonly metrics: GatewayMetrics;
  readonly adminActions: AdminActions;
  readonly listenerTls: ListenerTls | undefined;
  /** The status now (src/app/status.ts `gatherStatus`). */
  readonly status: () => GatewayStatus;
  /** What the probes must show at once (src/app/status.ts `probeChangeKey`). */
  readonly probeChangeKey: () => string;
  /** Whether `ha` is configured: the inputs then run only while this node leads. */
  readonly underHa: boolean;
  readonly createInput: InputFactory;
  readonly intake: IntakeSink;
  readonly inputs: { readonly adapters: readonly InputAdapter[] };
}

/**
 * The local HTTP server of one gateway: health page, status, metrics, admin actions, station
 * screen, item lookup, and the ingest routes of HTTP inputs. Built at the HTTP part's start, after
 * the inputs run, so the ingest routes are known (routes cannot be added to a listening server:
 * an http input added by a reload is served after a restart).
 */
export async function buildHttpServer(g: HttpServerParts): Promise<FastifyInstance> {
  const { config, deps, logger, live } = g;
  const { host } = splitListen(config.http.listen);
  const reports = () => g.queries.reports;
  const dcpKinds = () => new Map(live.current.config.dcps.map((d) => [d.key, d.kind as string]));
  // Item lookups run in threads with their own read-only connections (the event loop only posts
  // and sends), started at the first lookup and ended with the server. A buffer in memory cannot
  // be opened twice: there they run here, one at a time between other requests (tests, trials).
  const workers =
    config.buffer.path === ':memory:'
      ? undefined
      : new LookupWorkers({
          path: config.buffer.path,
          threads: config.http.limits.maxItemLookups,
          logger,
        });
  const answer = (question: ItemQuestion) =>
    workers
      ? workers.run(question, dcpKinds())
      : answerItemQuestion(reports(), question, dcpKinds());
  const server = buildHealthServer({
    logger,
    status: g.status,
    metrics: g.metrics,
    admin: { token: g.serverTokens.admin, actions: g.adminActions },
    limits: config.http.limits,
    listenHost: host,
    allowedHosts: config.http.allowedHosts,
    trustedClients: config.http.trustedClients,
    ...(g.listenerTls ? { tls: g.listenerTls } : {}),
    readToken: g.serverTokens.read,
    instance: gatewayInstanceId(config.buffer.path),
    probes: { changeKey: g.probeChangeKey },
    ...(deps.scrub ? { scrub: deps.scrub } : {}),
    station: {
      dcps: () => {
        const c = live.current.config;
        return c.dcps.map((d) => {
          const inputs = c.inputs.filter((i) => i.dcp === d.key);
          const named = inputs.flatMap((i) => (i.name ? [[i.id, i.name] as const] : []));
          return {
            key: d.key,
            kind: d.kind as string,
            inputs: inputs.map((i) => i.id),
            ...(named.length > 0 ? { inputNames: Object.fromEntries(named) } : {}),
          };
        });
      },
      site: () => live.current.config.site,
      recent: (keys, limit) => reports().stationRecent(keys, limit),
      counts: (keys, sinceIso) => reports().stationCounts(keys, sinceIso),
      readsAfter: (afterId, limit) => reports().readsAfter(afterId, limit),
      lastReadId: () => reports().lastReadId(),
      openContainers: () => g.live.mapper.openContainers(g.now()),
      status: g.status,
    },
    items: { answer },
  });
  if (workers) server.addHook('onClose', () => workers.close());
  if (g.underHa) {
    // Under `ha` the inputs run only while this node leads, maybe not yet: the ingest routes are
    // registered from a paused adapter of each (its token read, so a caller is told 503 with
    // Retry-After on a standby, not 401); the running input answers once this node leads.
    const httpInputs = config.inputs.filter((i) => inputKind(i).localRoutes === true);
    if (httpInputs.length > 0) {
      const { isRouteInput } = await import('../inputs/http/http-input.js');
      for (const c of httpInputs) {
        const standby = await g.createInput(c, g.intake, logger);
        if (!isRouteInput(standby)) continue;
        standby.setPaused?.(true);
        await standby.start();
        await standby.registerRoutes(
          server,
          () => g.inputs.adapters.find((i) => i.id === c.id) ?? standby,
        );
      }
    }
  } else if (
    g.inputs.adapters.some(
      (i) => typeof (i as { registerRoutes?: unknown }).registerRoutes === 'function',
    )
  ) {
    const { registerInputRoutes } = await import('../inputs/http/http-input.js');
    await registerInputRoutes(server, () => g.inputs.adapters);
  }
  const inClear = tokensInClear(g);
  if (inClear.length > 0) {
    const named =
      inClear.length === 1
        ? `${inClear[0]!} crosses`
        : `${inClear.slice(0, -1).join(', ')} and ${inClear.at(-1)!} cross`;
    logger.warn(
      { component: 'http', listen: config.http.listen, tokens: inClear },
      `INSECURE: http.listen is not loopback and the server speaks plain HTTP, so the ${named} the network in clear text: anyone on the path can read them and use them; set http.tls (docs/operations.md, "TLS on the local listener")`,
    );
  }
  if (!isLoopbackHost(host) && !g.serverTokens.read.configured()) {
    logger.warn(
      { component: 'http', listen: config.http.listen },
      'http.listen is not loopback and no read token is configured: anyone who can reach it reads the health page, the status (DCPs, inputs, recent problems) and the metrics; set http.readTokenFile or SCAN_GATEWAY_READ_TOKEN (docs/operations.md)',
    );
  }
  return server;
}
