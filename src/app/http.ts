import type { FastifyInstance } from 'fastify';
import { isLoopbackHost } from '../listener/host-check.js';
import { buildHealthServer } from '../health/server.js';
import type { Gateway } from './gateway.js';
import { splitListen } from './parts.js';
import { gatherStatus } from './status.js';

/**
 * The local HTTP server of one gateway: health page, status, metrics, admin actions, station
 * screen, item lookup, and the ingest routes of HTTP inputs. Built at the HTTP part's start, after
 * the inputs run, so the ingest routes are known (routes cannot be added to a listening server:
 * an http input added by a reload is served after a restart).
 */
export async function buildHttpServer(g: Gateway): Promise<FastifyInstance> {
  const { config, deps, logger, live } = g;
  const { host } = splitListen(config.http.listen);
  const reports = () => g.store.reports;
  const server = buildHealthServer({
    logger,
    status: () => gatherStatus(g),
    metrics: g.metrics,
    admin: { token: deps.adminToken, actions: g.adminActions },
    limits: config.http.limits,
    listenHost: host,
    allowedHosts: config.http.allowedHosts,
    readToken: deps.readToken,
    ...(deps.scrub ? { scrub: deps.scrub } : {}),
    station: {
      dcps: () => {
        const c = live.current.config;
        return c.dcps.map((d) => ({ key: d.key, kind: d.kind as string, inputs: c.inputs.filter((i) => i.dcp === d.key).map((i) => i.id) }));
      },
      site: () => live.current.config.site,
      recent: (keys, limit) => reports().stationRecent(keys, limit),
      counts: (keys, sinceIso) => reports().stationCounts(keys, sinceIso),
      readsAfter: (afterId, limit) => reports().readsAfter(afterId, limit),
      lastReadId: () => reports().lastReadId(),
      status: () => gatherStatus(g),
    },
    items: {
      trace: (reference, depth) =>
        reports().trace(reference, { ...(depth === undefined ? {} : { depth }), dcpKinds: new Map(live.current.config.dcps.map((d) => [d.key, d.kind as string])) }),
      search: (prefix, limit) => reports().searchItems(prefix, limit),
      byValue: (value, options) => reports().searchByValue(value, options),
    },
  });
  if (g.inputs.adapters.some((i) => typeof (i as { registerRoutes?: unknown }).registerRoutes === 'function')) {
    const { registerInputRoutes } = await import('../inputs/http/http-input.js');
    await registerInputRoutes(server, () => g.inputs.adapters);
  }
  if (!isLoopbackHost(host) && deps.readToken === undefined) {
    logger.warn(
      { component: 'http', listen: config.http.listen },
      'http.listen is not loopback and no read token is configured: anyone who can reach it reads the health page, the status (DCPs, inputs, recent problems) and the metrics; set http.readTokenFile or SCAN_GATEWAY_READ_TOKEN (docs/operations.md)',
    );
  }
  return server;
}
