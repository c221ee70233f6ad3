import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { HaStatusView } from './page-ha.js';
import { Counter, Gauge } from 'prom-client';
import { DEFAULT_HTTP_LIMITS, type HttpLimitsConfig } from '../config/schema.js';
import { scrubValue, type Logger } from '../log.js';
import { readTokenMatches, registerAdminRoutes, type AdminActions } from './admin.js';
import { hostAllowList } from '../listener/host-check.js';
import {
  capConnections,
  listenerOptions,
  tlsListenerOptions,
} from '../listener/listener-limits.js';
import { clientCertRefusal, type ListenerTls } from '../listener/listener-tls.js';
import type { Server as TlsServer } from 'node:tls';
import { shareConnections } from '../listener/connection-share.js';
import { guardListener } from '../listener/connection-guard.js';
import { WorkQueue } from '../listener/work-queue.js';
import { budgetRequests } from '../listener/request-budget.js';
import { collectRouteTable, guard, routeGuardOf } from '../listener/route-guard.js';
import { ProbeSnapshot, type ProbeAnswer, type ProbeAnswers } from './probe-snapshot.js';
import { registerListenerTlsMetrics, type GatewayMetrics } from './metrics.js';
import { PAGE_CSP, renderPage } from './page.js';
import { RefusalLog, REFUSAL_LOG_INTERVAL_MS } from '@scan-gateway/contract/refusal-log';
import type { GatewayStatus } from './status.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import type { ItemAnswer, ItemQuestion } from '../queries/item-questions.js';
import { LookupUnavailable } from '../queries/lookup-workers.js';
import { StationHub, STATION_HEARTBEAT_MS, type StationSource } from './station.js';
import { renderStationPage, renderUnknownStation, STATION_CSP } from './station-page.js';
import { INSTANCE_HEADER } from '../config/own-gateway.js';

export type { GatewayStatus } from './status.js';

export interface HealthServerOptions {
  logger: Logger;
  status: () => GatewayStatus;
  /** Serves `GET /metrics` when given. */
  metrics?: GatewayMetrics;
  /** Admin actions and the token that guards them; without it, `/api/v1/admin/*` answers 403. */
  admin?: { token: string | undefined; actions: AdminActions };
  /** Timeouts and connection cap (`http.limits`); default {@link DEFAULT_HTTP_LIMITS}. */
  limits?: HttpLimitsConfig;
  /** Host part of `http.listen`, accepted as a `Host` name; default 127.0.0.1. */
  listenHost?: string;
  /** More accepted `Host` values (`http.allowedHosts`), see {@link hostAllowList}. */
  allowedHosts?: readonly string[];
  /** Addresses that keep the connection reserve besides loopback (`http.trustedClients`), see {@link guardListener}. */
  trustedClients?: readonly string[];
  /** Token that guards `/`, `/api/v1/status`, `/metrics` and the detail of `/healthz`; undefined = open. */
  readToken?: string | undefined;
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
  items?: {
    answer: (question: ItemQuestion) => ItemAnswer | Promise<ItemAnswer>;
  };
  /** The gateway's instance id, sent by `/healthz` in `x-scan-gateway-instance` so `config check` knows its own gateway (config/own-gateway.ts). */
  instance?: string;
  /**
   * The probes (`/healthz`, `/readyz`, `/api/v1/ha/leader`) answer from a snapshot of the status
   * ({@link ProbeSnapshot}) at most `maxAgeMs` old (default 1 s), gathered anew sooner when
   * `changeKey` (cheap in-memory facts: phase, input states, the election) changes.
   */
  probes?: { changeKey?: () => string; maxAgeMs?: number };
}

/**
 * The station screen: serves `GET /station/<dcpKey>` and its event stream
 * `GET /station/<dcpKey>/events` when given (src/health/station.ts).
 */
export type StationOptions = StationSource;

/** Longest reference the item routes take, in characters (a reference is a barcode's text). */
export const MAX_ITEM_REFERENCE = 512;

/** Headers of every answer: nothing cached, nothing sniffed, no referrer leaves the page. */
const COMMON_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/**
 * Whether the gateway can take reads now: every part started, not stopping, and the buffer
 * accepting commits. Upstream trouble does not make it unready: reads are still buffered.
 */
export function readiness(s: GatewayStatus): { ready: boolean; reason?: string } {
  if (s.phase === 'starting') return { ready: false, reason: 'starting' };
  if (s.phase === 'stopping') return { ready: false, reason: 'stopping' };
  if (s.state === 'down') return { ready: false, reason: s.reasons.join('; ') || 'down' };
  return { ready: true };
}

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
 * Fair under abuse (`http.limits`): connections per client address ({@link shareConnections}),
 * item lookups through a bounded queue ({@link WorkQueue}; 429 past it), station streams per
 * address and closed when their client stops reading (station.ts).
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
  const refusedName = 'scan_gateway_http_refused_total';
  const refused = options.metrics
    ? ((options.metrics.registry.getSingleMetric(refusedName) as Counter<'reason'> | undefined) ??
      new Counter({
        name: refusedName,
        help: 'Requests and connections the local HTTP server refused or closed, by reason (host, read_token, admin_token, ingest_token, ingest_client_cert, tls_handshake, tls_handshake_timeout, tls_handshake_budget, connection_cap, client_connections, connection_requests, station_streams, client_station_streams, station_stalled, item_lookups).',
        labelNames: ['reason'],
        registers: [options.metrics.registry],
      }))
    : undefined;
  const count = (reason: string) => refused?.inc({ reason });
  const hostLog = new RefusalLog(logger, 'request with a foreign Host header refused', intervalMs);
  const readLog = new RefusalLog(logger, 'read call refused: no valid read token', intervalMs);
  const capLog = new RefusalLog(
    logger,
    'connection refused: the connection cap is reached',
    intervalMs,
  );
  capConnections(app.server, limits, (remote) => {
    count('connection_cap');
    capLog.note({ remote, maxConnections: limits.maxConnections });
  });
  // Before the share: a connection the guard closes is never counted there.
  const connectionGuard = guardListener(app.server, {
    limits,
    tls: tls !== undefined,
    trustedClients: options.trustedClients ?? [],
    logger,
    intervalMs,
    count,
  });
  const shareLog = new RefusalLog(
    logger,
    'connection closed: the client address holds its share of connections',
    intervalMs,
  );
  const perClient = Math.min(limits.maxConnectionsPerClient, limits.maxConnections);
  shareConnections(app.server, {
    perClient,
    graceMs: limits.connectionGraceMs,
    onClose: (remote, action) => {
      count('client_connections');
      shareLog.note({
        remote,
        maxConnectionsPerClient: perClient,
        closed: action === 'shed' ? 'the longest-waiting idle connection' : 'the new connection',
      });
    },
  });
  if (tls) {
    // A client that does not trust the certificate (a tablet without the site CA) or speaks plain
    // HTTP to this port gives up in the handshake, where no request exists to answer: only this
    // line tells the operator why a screen stays blank.
    const handshakeLog = new RefusalLog(logger, 'TLS handshake failed', intervalMs);
    app.addHook('onClose', async () => handshakeLog.flush());
    (app.server as unknown as TlsServer).on(
      'tlsClientError',
      (err: Error & { code?: string }, socket) => {
        const remote = socket.remoteAddress ?? 'unknown';
        socket.destroy();
        // A client that hung up before its handshake (a shed idle socket, a closed tab) refused nothing.
        if (err.code === 'ECONNRESET' || err.code === 'EPIPE') return;
        count('tls_handshake');
        handshakeLog.note({ remote, why: err.code ?? err.message.slice(0, 200) });
      },
    );
  }
  const lookupLog = new RefusalLog(
    logger,
    'item lookup refused: too many lookups running and waiting',
    intervalMs,
  );
  const streamLog = new RefusalLog(logger, 'station stream refused or closed', intervalMs);
  const budgetLog = new RefusalLog(
    logger,
    'connection closed: it sent more requests a second than its budget',
    intervalMs,
  );
  // Pipelined or repeated requests of one connection, bounded before the router sees them.
  budgetRequests(app.server, {
    perSecond: limits.maxRequestsPerConnectionPerSecond,
    headers: COMMON_HEADERS,
    onRefuse: (remote) => {
      count('connection_requests');
      budgetLog.note({
        remote,
        maxRequestsPerConnectionPerSecond: limits.maxRequestsPerConnectionPerSecond,
      });
    },
  });
  app.addHook('onClose', async () => {
    for (const l of [hostLog, readLog, capLog, shareLog, lookupLog, streamLog, budgetLog])
      l.flush();
    connectionGuard.flush();
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

  const readToken = options.readToken;
  const readAllowed = (request: FastifyRequest) =>
    readToken === undefined || readTokenMatches(readToken, request.headers.authorization);
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

  const items = options.items;
  if (items) {
    const tooLong = (reply: FastifyReply) =>
      reply.code(400).send({
        statusCode: 400,
        error: 'Bad Request',
        message: `a reference is at most ${MAX_ITEM_REFERENCE} characters`,
      });
    // A lookup is tens of ms of SQLite and JSON work for a wide item, done in a thread of its own:
    // `maxItemLookups` at once and a bounded line behind them, so a burst of lookups holds bounded
    // memory and work, and the excess is refused at once.
    const lookups = new WorkQueue({
      concurrency: limits.maxItemLookups,
      maxWaiting: limits.maxQueuedItemLookups,
    });
    const lookup = async (request: FastifyRequest, reply: FastifyReply, question: ItemQuestion) => {
      const job = lookups.run(() => {
        // A client gone while waiting: nothing to answer, no work to do.
        if (request.socket.destroyed) return undefined;
        return items.answer(question);
      });
      if (!job) {
        count('item_lookups');
        lookupLog.note({
          remote: request.ip,
          running: lookups.running,
          waiting: lookups.waiting,
          maxQueuedItemLookups: limits.maxQueuedItemLookups,
        });
        return reply.code(429).header('retry-after', '1').send({
          statusCode: 429,
          error: 'Too Many Requests',
          message: 'too many item lookups are running and waiting; try again in a second',
        });
      }
      let done: ItemAnswer | undefined;
      try {
        done = await job;
      } catch (err) {
        if (!(err instanceof LookupUnavailable)) throw err;
        return reply
          .code(503)
          .header('retry-after', '1')
          .send({ statusCode: 503, error: 'Service Unavailable', message: err.message });
      }
      if (!done) return reply.hijack();
      return reply
        .code(done.code)
        .type('application/json; charset=utf-8')
        .send(scrub ? scrubJson(done.json, scrub) : done.json);
    };
    // Same read token rules as the status: the trace shows raw reads.
    app.get(
      '/api/v1/items',
      { onRequest: guardRead, config: guard('read') },
      async (request, reply) => {
        const query = request.query as Record<string, unknown>;
        const prefix = String(query.prefix ?? '');
        const value = String(query.value ?? '');
        if (prefix.length > MAX_ITEM_REFERENCE || value.length > MAX_ITEM_REFERENCE)
          return tooLong(reply);
        if (value !== '') {
          const ai = query.ai === undefined ? undefined : String(query.ai);
          const cursor = query.cursor === undefined ? undefined : String(query.cursor);
          const limit = query.limit === undefined ? undefined : Number(query.limit);
          const bad = (message: string) =>
            reply.code(400).send({ statusCode: 400, error: 'Bad Request', message });
          if (ai !== undefined && !/^\d{2,4}$/.test(ai))
            return bad(
              `ai must be a GS1 Application Identifier of 2 to 4 digits (e.g. 21), got "${ai}"`,
            );
          if (cursor !== undefined && !/^\d{2,4}\.\d{1,15}$/.test(cursor))
            return bad(
              `cursor must be the "next" of the previous page (e.g. 21.1234), got "${cursor}"`,
            );
          if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1))
            return bad(`limit must be a whole number of at least 1, got "${String(query.limit)}"`);
          return lookup(request, reply, {
            kind: 'byValue',
            value,
            ...(ai !== undefined ? { ai } : {}),
            ...(limit !== undefined ? { limit } : {}),
            ...(cursor !== undefined ? { cursor } : {}),
          });
        }
        if (prefix === '')
          return reply.code(400).send({
            statusCode: 400,
            error: 'Bad Request',
            message:
              'give ?prefix=<start of a reference> or ?value=<an AI value: serial, SSCC, lot, GTIN>, or ask for /api/v1/items/<reference>',
          });
        return lookup(request, reply, { kind: 'search', prefix });
      },
    );
    // A wildcard: a reference may hold a slash (a GS1 Digital Link, a path-like serial).
    app.get(
      '/api/v1/items/*',
      { onRequest: guardRead, config: guard('read') },
      async (request, reply) => {
        const reference = (request.params as Record<string, string>)['*'] ?? '';
        if (reference === '')
          return reply.code(400).send({
            statusCode: 400,
            error: 'Bad Request',
            message: 'give the reference: /api/v1/items/<reference>',
          });
        if (reference.length > MAX_ITEM_REFERENCE) return tooLong(reply);
        const depth = Number((request.query as Record<string, unknown>).depth ?? Number.NaN);
        return lookup(request, reply, {
          kind: 'trace',
          reference,
          ...(Number.isFinite(depth) ? { depth } : {}),
        });
      },
    );
  }

  if (options.station) {
    const hub = new StationHub(options.station, logger, {
      heartbeatMs: Math.min(STATION_HEARTBEAT_MS, Math.floor(limits.idleTimeoutMs / 2)),
      maxStreamsPerClient: limits.maxStationStreamsPerClient,
      stallMs: limits.stationStreamStallMs,
      onStalled: (remote, blockedMs) => {
        count('station_stalled');
        streamLog.note({
          remote,
          closed: 'its client did not take what was sent',
          blockedMs,
          stationStreamStallMs: limits.stationStreamStallMs,
        });
      },
      ...(scrub ? { scrub } : {}),
    });
    if (
      options.metrics &&
      !options.metrics.registry.getSingleMetric('scan_gateway_station_streams')
    ) {
      new Gauge({
        name: 'scan_gateway_station_streams',
        help: 'Station screens open now (event streams of /station/<dcpKey>/events), at most 32.',
        registers: [options.metrics.registry],
        collect() {
          this.set(hub.size);
        },
      });
    }
    // Before the server waits for its connections: an open screen must not hold up a stop.
    app.addHook('preClose', async () => hub.close());
    const known = () => options.station!.dcps().map((d) => d.key);
    app.get(
      '/station/:dcpKey',
      { onRequest: guardRead, config: guard('read') },
      async (request, reply) => {
        const { dcpKey } = request.params as { dcpKey: string };
        const snapshot = hub.snapshot(dcpKey);
        reply
          .type('text/html; charset=utf-8')
          .header('content-security-policy', STATION_CSP)
          .header('x-frame-options', 'DENY');
        if (!snapshot) return reply.code(404).send(renderUnknownStation(dcpKey, known()));
        return reply.send(renderStationPage(snapshot));
      },
    );
    app.get(
      '/station/:dcpKey/events',
      { onRequest: guardRead, config: guard('read') },
      async (request, reply) => {
        const { dcpKey } = request.params as { dcpKey: string };
        if (!hub.station(dcpKey))
          return reply.code(404).send({
            statusCode: 404,
            error: 'Not Found',
            message: `no DCP ${dcpKey} in the configuration; stations: ${known().join(', ')}`,
          });
        if (hub.full) {
          count('station_streams');
          return reply.code(503).header('retry-after', '30').send({
            statusCode: 503,
            error: 'Service Unavailable',
            message: 'too many station screens are open; close one, or try again later',
          });
        }
        if (hub.fullFor(request.ip)) {
          count('client_station_streams');
          streamLog.note({
            remote: request.ip,
            reason: 'this address holds its share',
            maxStationStreamsPerClient: limits.maxStationStreamsPerClient,
          });
          return reply
            .code(503)
            .header('retry-after', '30')
            .send({
              statusCode: 503,
              error: 'Service Unavailable',
              message: `this address has ${limits.maxStationStreamsPerClient} station screens open, its share; close one, or try again later`,
            });
        }
        reply.hijack();
        const res = reply.raw;
        res.writeHead(200, {
          ...COMMON_HEADERS,
          'content-type': 'text/event-stream; charset=utf-8',
          connection: 'keep-alive',
          'x-accel-buffering': 'no',
        });
        if (!hub.open(dcpKey, res, request.ip)) res.end();
        return reply;
      },
    );
  }

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

/**
 * The probes' answers from one status: `/healthz` (the state alone, or the summary with read
 * access; 503 when `down`), `/readyz` ({@link readiness}) and `/api/v1/ha/leader` (200 on the
 * leader, 503 otherwise or without `ha`; the role, the leader and the epoch, nothing more: it is
 * open to anyone who reaches the port).
 */
function renderProbes(s: GatewayStatus): ProbeAnswers {
  const code = s.state === 'down' ? 503 : 200;
  const rejectedReads = s.inputs.reduce((a, i) => a + (i.counters?.rejections ?? 0), 0);
  const heldScans = s.buffer.heldScans ?? s.buffer.scans.held ?? 0;
  const detail = {
    status: s.state,
    reasons: s.reasons,
    problems: (s.healthProblems ?? []).map((p) => ({
      code: p.code,
      severity: p.severity,
      sentence: p.sentence,
    })),
    // `pendingScans` keeps its v1 meaning: waiting for delivery (not in a batch yet, or in one the service has not finished).
    pendingScans: s.buffer.undeliveredScans,
    waitingScans: s.buffer.undeliveredScans,
    heldScans,
    oldestPendingAgeMs: s.buffer.oldestPendingAgeMs,
    deliveredScans: s.buffer.scans.delivered ?? 0,
    failedScans: (s.buffer.scans.failed ?? 0) + heldScans,
    rejectedReads,
    rejectedReadsLastHour: s.recent?.rejections ?? 0,
    filesRefusedLastHour: s.recent?.filesRefused ?? 0,
    lastSuccessfulUploadAt: s.delivery.lastSuccessAt ?? null,
    inputs: s.inputs.map((i) => ({
      id: i.id,
      type: i.type,
      state: i.state,
      ...(i.lastError ? { lastError: i.lastError } : {}),
    })),
    ...(s.ha ? { ha: haSummary(s.ha as HaStatusView) } : {}),
  };
  const ready = readiness(s);
  const ha = s.ha as HaStatusView | undefined;
  const leads = ha?.role === 'leader';
  return {
    healthzState: { code, body: JSON.stringify({ status: s.state }) },
    healthzDetail: { code, body: JSON.stringify(detail) },
    readyz: { code: ready.ready ? 200 : 503, body: JSON.stringify(ready) },
    leader: {
      code: leads ? 200 : 503,
      body: JSON.stringify(
        ha
          ? { leader: leads, role: ha.role, leaderNode: ha.leader ?? null, epoch: ha.epoch ?? null }
          : { leader: false, ha: false },
      ),
    },
  };
}

/** The election in a few fields (healthz with read access). */
function haSummary(ha: HaStatusView): Record<string, unknown> {
  return {
    nodeId: ha.nodeId,
    role: ha.role,
    leaderNode: ha.leader ?? null,
    epoch: ha.epoch ?? null,
    etcdReachable: ha.etcd.reachable,
    lastTakeover: ha.lastTakeover ?? null,
    possibleDuplicates: ha.possibleDuplicates.reads,
  };
}

/**
 * `json` with `scrub` applied to every string in it. The text is searched first, so an answer with
 * no secret in it (nearly all) costs a pass over the text and no parse; one with a hit is scrubbed
 * value by value, because a needle found across the JSON's own quotes must not break its syntax.
 * "Bearer" alone sends it value by value too: `Bearer\t<token>` in a value is `Bearer\\t…` in
 * the text, which the scrubber's whitespace does not match.
 */
function scrubJson(json: string, scrub: (text: string) => string): string {
  return scrub(json) === json && !/bearer/i.test(json)
    ? json
    : JSON.stringify(scrubValue(JSON.parse(json), scrub));
}
