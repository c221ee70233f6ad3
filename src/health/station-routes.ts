import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Gauge } from 'prom-client';
import type { HttpLimitsConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import { RefusalLog } from '@scan-gateway/service-kit/refusal-log';
import { guard } from '../listener/route-guard.js';
import { COMMON_HEADERS } from './common-headers.js';
import type { GatewayMetrics } from './metrics.js';
import { StationHub, STATION_HEARTBEAT_MS, type StationSource } from './station.js';
import { renderStationPage, renderUnknownStation, STATION_CSP } from './station-page.js';

/** What {@link registerStationRoutes} needs of the server. */
export interface StationRoutesOptions {
  station: StationSource;
  limits: HttpLimitsConfig;
  logger: Logger;
  /** Least time between two log lines of refused or closed streams, in ms. */
  intervalMs: number;
  metrics?: GatewayMetrics | undefined;
  /** The read token's check, first hook of each route. */
  guardRead: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
  /** Counts a refusal in `scan_gateway_http_refused_total` by reason. */
  count: (reason: string) => void;
  scrub?: ((text: string) => string) | undefined;
}

/**
 * The station screen behind the read token: `GET /station/<dcpKey>` and its event stream
 * `GET /station/<dcpKey>/events` (src/health/station.ts), streams bounded in all and per address,
 * closed when their client stops reading.
 */
export function registerStationRoutes(app: FastifyInstance, options: StationRoutesOptions): void {
  const { limits, logger, guardRead, count, scrub } = options;
  const streamLog = new RefusalLog(logger, 'station stream refused or closed', options.intervalMs);
  app.addHook('onClose', async () => streamLog.flush());
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
  const known = () => options.station.dcps().map((d) => d.key);
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
