import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ErrorCodes, GatewayError } from '../errors.js';

/**
 * What guards a route of the local HTTP server, declared by the route itself in its `config`:
 * - `open`: nobody is refused (the probes);
 * - `read`: the read token, when one is configured;
 * - `admin`: the admin token;
 * - `ingest`: the input's ingest token, and a client certificate when `http.tls.clientCaFile` is set.
 *
 * Every decision (the client-certificate check, the label of a refused call's count) reads the
 * guard of the route the router matched, never the request's URL: the router decodes the path
 * before it matches (`/api/v1/%72eads` is `/api/v1/reads`), so a check on the raw URL would let an
 * encoded path reach a route without that route's checks.
 */
export type RouteGuard = 'open' | 'read' | 'admin' | 'ingest';

/** The `config` a route gives to declare its guard: `app.get(path, { config: guard('read') }, …)`. */
export function guard(kind: RouteGuard): { guard: RouteGuard } {
  return { guard: kind };
}

/** The guard of the route `request` matched; undefined when it matched none (a 404). */
export function routeGuardOf(request: FastifyRequest): RouteGuard | undefined {
  return (request.routeOptions.config as { guard?: RouteGuard } | undefined)?.guard;
}

/** One route of a server's table: method, path as registered (`/station/:dcpKey`), guard. */
export interface RouteEntry {
  method: string;
  url: string;
  guard: RouteGuard;
}

const tables = new WeakMap<FastifyInstance, RouteEntry[]>();

/**
 * Keeps the table of every route added to `app` from now on (child scopes included: the ingest
 * routes are registered in one) and refuses a route that declares no guard, so a new route cannot
 * be served without saying who may call it.
 * @throws GatewayError `SCANGW_E_INTERNAL` when a route is added without `config.guard`.
 */
export function collectRouteTable(app: FastifyInstance): void {
  const table: RouteEntry[] = [];
  tables.set(app, table);
  app.addHook('onRoute', (route) => {
    const kind = (route.config as { guard?: RouteGuard } | undefined)?.guard;
    if (kind === undefined)
      throw new GatewayError(
        ErrorCodes.INTERNAL,
        `route ${String(route.method)} ${route.url} declares no guard (config.guard: open, read, admin or ingest)`,
      );
    for (const method of [route.method].flat())
      table.push({ method: String(method), url: route.url ?? route.path, guard: kind });
  });
}

/** The routes of `app` with their guards ({@link collectRouteTable}); empty when not collected. */
export function routeTable(app: FastifyInstance): readonly RouteEntry[] {
  return tables.get(app) ?? [];
}
