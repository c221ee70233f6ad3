import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { Server as TlsServer } from 'node:tls';
import type { Clock } from '../clock.js';
import { INSTANCE_HEADER } from '../config/own-gateway.js';
import { DEFAULT_HTTP_LIMITS, type HttpLimitsConfig } from '../config/schema.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import { hostAllowList } from '../listener/host-check.js';
import { listenerOptions, tlsListenerOptions } from '../listener/listener-limits.js';
import { clientCertRefusal, type ListenerTls } from '../listener/listener-tls.js';
import { RefusalLog, REFUSAL_LOG_INTERVAL_MS } from '@scan-gateway/service-kit/refusal-log';
import { collectRouteTable, guard, routeGuardOf } from '../listener/route-guard.js';
import { scrubValue, type Logger } from '../log.js';
import { tokenGuard, type TokenGuard } from '../listener/rotating-token.js';
import { readTokenMatches, registerAdminRoutes, type AdminActions } from './admin.js';
import { COMMON_HEADERS } from './common-headers.js';
import { registerItemRoutes, type ItemLookups } from './item-routes.js';
import { guardHealthListener } from './listener-guards.js';
import { registerListenerTlsMetrics, type GatewayMetrics } from './metrics.js';
import { PAGE_CSP, renderPage } from './page.js';
import { renderProbes } from './probe-answers.js';
import { ProbeSnapshot, type ProbeAnswer } from './probe-snapshot.js';
import type { StationSource } from './station.js';
import { registerStationRoutes } from './station-routes.js';
import type { GatewayStatus } from './status.js';

export { readiness } from './probe-answers.js';
export { MAX_ITEM_REFERENCE } from './item-routes.js';
export type { GatewayStatus } from './status.js';

export interface HealthServerOptions {
  logger: Logger;
  status: () => GatewayStatus;
  /** Serves `GET /metrics` when given. */
  metrics?: GatewayMetrics;
  /** Admin actions and the token that guards them; without it, `/api/v1/admin/*` answers 403. */
  admin?: { token: string | TokenGuard | undefined; actions: AdminActions };
  /** Timeouts and connection cap (`http.limits`); default {@link DEFAULT_HTTP_LIMITS}. */
  limits?: HttpLimitsConfig;
  /** Host part of `http.listen`, accepted as a `Host` name; default 127.0.0.1. */
  listenHost?: string;
  /** More accepted `Host` values (`http.allowedHosts`), see {@link hostAllowList}. */
  allowedHosts?: readonly string[];
  /** Addresses that keep the connection reserve besides loopback (`http.trustedClients`), see {@link guardListener}. */
  trustedClients?: readonly string[];
  /** Token that guards `/`, `/api/v1/status`, `/metrics` and the detail of `/healthz`; undefined = open. */
  readToken?: string | TokenGuard | undefined;
  /** Least time between two log lines of one kind of refusal, in ms; default 10 s. */
  refusalLogIntervalMs?: number;
  /**
   * Cuts known secrets out of every text the server shows (status JSON, health page, healthz,
   * readyz), raw excerpts of refused input included: the log's {@link SecretScrubber}.
   */
  scrub?: (text: string) => string;
  /**
   * Serve over HTTPS with this certificate (`http.tls`, loaded before the server is built); with
   * `clientCaFile`, ingest requires a client certificate signed by it (401 without, 403 with a
   * foreign one) besides its token.
   */
  tls?: ListenerTls;
  /** The station screen, when given: see {@link StationOptions}. */
  station?: StationOptions;
  /**
   * Item lookup, read-only over the buffer: serves `GET /api/v1/items/<reference>`,
   * `GET /api/v1/items?prefix=…` and `GET /api/v1/items?value=…[&ai=…][&limit=…][&cursor=…]` when
   * given. `answer` gives the status code and the body as JSON text (src/queries/item-questions.ts),
   * made where the work ran (a lookup thread: src/queries/lookup-workers.ts); it rejects with
   * `LookupUnavailable` (answered 503 with its reason and Retry-After) when no thread could answer.
   */
  items?: ItemLookups;
  /** The gateway's instance id, sent by `/healthz` in `x-scan-gateway-instance` so `config check` knows its own gateway (config/own-gateway.ts). */
  instance?: string;
  /**
   * The probes (`/healthz`, `/readyz`, `/api/v1/ha/leader`) answer from a snapshot of the status
   * ({@link ProbeSnapshot}) at most `maxAgeMs` old (default 1 s), gathered anew sooner when
   * `changeKey` (cheap in-memory facts: phase, input states, the election) changes.
   */
  probes?: { changeKey?: () => string; maxAgeMs?: number };
  /** The listener's clock (cooldowns, handshake ages); default the system clock. */
  now?: Clock;
}

/**
 * The station screen: serves `GET /station/<dcpKey>` and its event stream
 * `GET /station/<dcpKey>/events` when given (src/health/station.ts).
 */
export type StationOptions = StationSource;

/**
 * The local HTTP server (loopback by default, `http.listen`):
 * - `GET /`: the health page (page.ts);
 * - `GET /healthz`: alive, with a summary (state, pending scans, last upload, each input's state);
 *   503 when `down`;
 * - `GET /readyz`: 200 `{ ready: true }` or 503 `{ ready: false, reason }` ({@link readiness});
 * - `GET /api/v1/status`: everything, as JSON (status.ts, docs/operations.md);
 * - `GET /metrics`: Prometheus text format (metrics.ts);
 * - `POST /api/v1/admin/{action}`: admin actions behind a bearer token (admin.ts).
 * Built here; the app adds its own routes (such as ingest) before it listens.
 *
 * Fair under abuse (`http.limits`): the connection cap, reserve, handshake bounds, cooldown,
 * per-address share and per-connection request budget ({@link guardHealthListener}); item lookups
 * through a bounded queue (item-routes.ts; 429 past it); station streams per address and closed
 * when their client stops reading (station-routes.ts).
 */
export function buildHealthServer(options: HealthServerOptions): FastifyInstance {
  const limits = options.limits ?? DEFAULT_HTTP_LIMITS;
  const logger = options.logger.child({ component: 'http' });
  const tls = options.tls;
  const base = {
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // A browser tab kept open holds a keep-alive connection; it must not delay a stop.
    forceCloseConnections: true,
  };
  // The same routes, hooks and limits either way; only the node server under them differs.
  const app = tls
    ? (Fastify({
        ...base,
        ...tlsListenerOptions(limits, tls.serverOptions()),
      }) as unknown as FastifyInstance)
    : Fastify({ ...base, ...listenerOptions(limits) });
  tls?.attach(app.server as unknown as TlsServer);
  // Before any route: every route declares its guard, and the table is kept for the route walk.
  collectRouteTable(app);
  if (tls && options.metrics)
    registerListenerTlsMetrics(options.metrics.registry, () => tls.status(Date.now()));
  const intervalMs = options.refusalLogIntervalMs ?? REFUSAL_LOG_INTERVAL_MS;
  const { count } = guardHealthListener(app, {
    limits,
    logger,
    tls: tls !== undefined,
    trustedClients: options.trustedClients ?? [],
    intervalMs,
    metrics: options.metrics,
    now: options.now,
  });
  const hostLog = new RefusalLog(logger, 'request with a foreign Host header refused', intervalMs);
  const readLog = new RefusalLog(logger, 'read call refused: no valid read token', intervalMs);
  app.addHook('onClose', async () => {
    hostLog.flush();
    readLog.flush();
  });

  const hostAllowed = hostAllowList(options.listenHost ?? '127.0.0.1', options.allowedHosts ?? []);
  // First hook of every route, the ingest and admin routes and 404s included.
  app.addHook('onRequest', async (request, reply) => {
    const host = request.headers.host;
    if (hostAllowed(host)) return undefined;
    count('host');
    hostLog.note({
      remote: request.ip,
      host: host === undefined ? null : host.slice(0, 100),
      url: request.url.split('?')[0]?.slice(0, 100),
    });
    return reply.code(421).send({
      statusCode: 421,
      error: 'Misdirected Request',
      message: `this server does not answer for Host ${host === undefined ? '(none)' : JSON.stringify(host.slice(0, 100))}; use localhost or an address listed in http.allowedHosts`,
    });
  });
  // Ingest with client certificates: the TLS layer asks every client for one but lets the page
  // work without; the ingest route is refused here, before its token is even looked at.
  const certRefused = new WeakSet<FastifyRequest>();
  if (tls?.clientCertificates) {
    const certLog = new RefusalLog(
      logger,
      'ingest call refused: no accepted client certificate',
      intervalMs,
    );
    app.addHook('onClose', async () => certLog.flush());
    app.addHook('onRequest', async (request, reply) => {
      // The route the router matched, never the URL: it decodes the path before matching.
      if (routeGuardOf(request) !== 'ingest') return undefined;
      const refusal = clientCertRefusal(request.raw.socket);
      if (!refusal) return undefined;
      certRefused.add(request);
      count('ingest_client_cert');
      certLog.note({ remote: request.ip, status: refusal.statusCode, why: refusal.message });
      return reply.code(refusal.statusCode).send({
        statusCode: refusal.statusCode,
        error: refusal.statusCode === 401 ? 'Unauthorized' : 'Forbidden',
        message: refusal.message,
      });
    });
  }
  app.addHook('onSend', async (_request, reply) => {
    reply.headers(COMMON_HEADERS);
  });
  const scrub = options.scrub;
  // Every route below shows the status through this: nothing the gateway knows as a secret leaves.
  const status = scrub
    ? () => scrubValue(options.status(), scrub) as GatewayStatus
    : options.status;

  // Every 401 counted by the guard of the route that gave it, the ingest route's (registered by
  // the input) included, whatever encoding of its path reached it.
  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode !== 401 || certRefused.has(request)) return;
    const kind = routeGuardOf(request);
    count(kind === 'admin' || kind === 'ingest' ? `${kind}_token` : 'read_token');
  });

  const readToken = tokenGuard(options.readToken);
  const readAllowed = (request: FastifyRequest) =>
    !readToken.configured() ||
    readToken.accepts((t) => readTokenMatches(t, request.headers.authorization));
  const guardRead = async (request: FastifyRequest, reply: FastifyReply) => {
    if (readAllowed(request)) return undefined;
    readLog.note({
      remote: request.ip,
      url: request.url.split('?')[0]?.slice(0, 100),
      given: request.headers.authorization === undefined ? 'no token' : 'wrong token',
    });
    // Two challenges: a browser prompts for Basic (user name: anything, password: the token); scripts send Bearer.
    return reply
      .code(401)
      .header('www-authenticate', [
        'Basic realm="scan-gateway", charset="UTF-8"',
        'Bearer realm="scan-gateway"',
      ])
      .send({
        statusCode: 401,
        error: 'Unauthorized',
        message:
          'a read token is required: Authorization: Bearer <token>, or HTTP Basic with the token as password',
      });
  };

  // The probes answer from a snapshot: a flood of them gathers the status once a second, not once
  // each, and every answer is the same few bytes (probe-snapshot.ts).
  const probes = new ProbeSnapshot({
    gather: status,
    render: (s) => renderProbes(s),
    ...(options.probes?.changeKey ? { changeKey: options.probes.changeKey } : {}),
    ...(options.probes?.maxAgeMs !== undefined ? { maxAgeMs: options.probes.maxAgeMs } : {}),
  });
  // What the page and the status route gather anyway renews the probes' snapshot.
  const fresh = () => {
    const s = status();
    probes.offer(s);
    return s;
  };
  const sendProbe = (reply: FastifyReply, answer: ProbeAnswer) =>
    reply.code(answer.code).type('application/json; charset=utf-8').send(answer.body);

  app.get('/', { onRequest: guardRead, config: guard('read') }, async (_request, reply) => {
    return reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', PAGE_CSP)
      .header('x-frame-options', 'DENY')
      .send(renderPage(fresh()));
  });

  // Open to probes; without the read token (when one is configured) only the state.
  app.get('/healthz', { config: guard('open') }, async (request, reply) => {
    if (options.instance !== undefined) reply.header(INSTANCE_HEADER, options.instance);
    const answers = probes.answers();
    return sendProbe(reply, readAllowed(request) ? answers.healthzDetail : answers.healthzState);
  });

  // High availability: keepalived's check script asks whether this node leads (200) or not (503).
  // Open like /healthz's state, without a token: it says only the role, the leader and the epoch.
  app.get('/api/v1/ha/leader', { config: guard('open') }, async (_request, reply) =>
    sendProbe(reply, probes.answers().leader),
  );

  app.get('/readyz', { config: guard('open') }, async (_req, reply) =>
    sendProbe(reply, probes.answers().readyz),
  );

  app.get('/api/v1/status', { onRequest: guardRead, config: guard('read') }, async () => fresh());

  if (options.items)
    registerItemRoutes(app, {
      items: options.items,
      limits,
      logger,
      intervalMs,
      guardRead,
      count,
      scrub,
    });
  if (options.station)
    registerStationRoutes(app, {
      station: options.station,
      limits,
      logger,
      intervalMs,
      metrics: options.metrics,
      guardRead,
      count,
      scrub,
    });

  const metrics = options.metrics;
  if (metrics) {
    app.get('/metrics', { onRequest: guardRead, config: guard('read') }, async (_req, reply) =>
      reply.type(metrics.contentType).send(await metrics.text()),
    );
  }

  const adminLog = new RefusalLog(
    options.logger.child({ component: 'admin' }),
    'admin call refused',
    intervalMs,
  );
  app.addHook('onClose', async () => adminLog.flush());
  registerAdminRoutes(app, {
    token: options.admin?.token,
    actions: options.admin?.actions ?? unavailableActions,
    logger: options.logger.child({ component: 'admin' }),
    refusals: adminLog,
  });
  return app;
}

const unavailable = () => {
  throw new GatewayError(ErrorCodes.INTERNAL, 'admin actions are not wired in this server');
};
const unavailableActions: AdminActions = {
  retry: unavailable,
  pause: unavailable,
  resume: unavailable,
};
