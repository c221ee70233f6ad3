import type { FastifyInstance } from 'fastify';
import type { Server as TlsServer } from 'node:tls';
import { Counter } from 'prom-client';
import type { Clock } from '../clock.js';
import type { HttpLimitsConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import { guardListener } from '../listener/connection-guard.js';
import { shareConnections } from '../listener/connection-share.js';
import { capConnections } from '../listener/listener-limits.js';
import { RefusalLog } from '@scan-gateway/service-kit/refusal-log';
import { budgetRequests } from '../listener/request-budget.js';
import { COMMON_HEADERS } from './common-headers.js';
import type { GatewayMetrics } from './metrics.js';

/** Options of {@link guardHealthListener}. */
export interface HealthListenerGuardsOptions {
  limits: HttpLimitsConfig;
  logger: Logger;
  /** Whether the server speaks TLS (handshake budget, deadline and failures). */
  tls: boolean;
  /** Addresses that keep the connection reserve besides loopback (`http.trustedClients`). */
  trustedClients: readonly string[];
  /** Least time between two log lines of one kind of refusal, in ms. */
  intervalMs: number;
  metrics?: GatewayMetrics | undefined;
  now?: Clock | undefined;
}

/**
 * The health/ingest server's connection and request bounds (`http.limits`), in the order they
 * must see a connection: the cap, the guard (reserve, handshakes, cooldown), the per-address
 * share; TLS handshake failures; the request budget of each connection, before the router. Every
 * refusal is counted in `scan_gateway_http_refused_total{reason}` and logged, rate-limited.
 * @returns `count`, for the refusals the routes make (host, tokens, lookups, streams).
 */
export function guardHealthListener(
  app: FastifyInstance,
  options: HealthListenerGuardsOptions,
): { count: (reason: string) => void } {
  const { limits, logger, intervalMs, tls } = options;
  const refusedName = 'scan_gateway_http_refused_total';
  const refused = options.metrics
    ? ((options.metrics.registry.getSingleMetric(refusedName) as Counter<'reason'> | undefined) ??
      new Counter({
        name: refusedName,
        help: 'Requests and connections the local HTTP server refused or closed, by reason (host, read_token, admin_token, ingest_token, ingest_client_cert, tls_handshake, tls_handshake_timeout, tls_handshake_budget, connection_cap, connection_cooldown, client_connections, connection_requests, station_streams, client_station_streams, station_stalled, item_lookups).',
        labelNames: ['reason'],
        registers: [options.metrics.registry],
      }))
    : undefined;
  const count = (reason: string) => refused?.inc({ reason });
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
    tls,
    trustedClients: options.trustedClients,
    logger,
    intervalMs,
    count,
    ...(options.now ? { now: options.now } : {}),
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
  const budgetLog = new RefusalLog(
    logger,
    'connection closed: it sent more requests a second than its budget',
    intervalMs,
  );
  // Pipelined or repeated requests of one connection, bounded before the router sees them.
  budgetRequests(app.server, {
    perSecond: limits.maxRequestsPerConnectionPerSecond,
    headers: COMMON_HEADERS,
    ...(options.now ? { now: options.now } : {}),
    onRefuse: (remote, retryAfterMs) => {
      // Its address (untrusted) may not connect again before the Retry-After it was told.
      connectionGuard.coolDown(remote, retryAfterMs);
      count('connection_requests');
      budgetLog.note({
        remote,
        maxRequestsPerConnectionPerSecond: limits.maxRequestsPerConnectionPerSecond,
      });
    },
  });
  app.addHook('onClose', async () => {
    for (const l of [capLog, shareLog, budgetLog]) l.flush();
    connectionGuard.flush();
  });
  return { count };
}
