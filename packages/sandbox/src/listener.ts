import type { Server } from 'node:http';

/**
 * Timeouts and connection cap of the sandbox's HTTP listener, the same fields as the gateway's
 * `http.limits` (`HttpLimitsConfig` in src/config/schema.ts), so the daemon can pass its own.
 * Times in ms.
 */
export interface HttpLimitsConfig {
  /** Most connections open at once; one past it is closed as soon as it is accepted. */
  maxConnections: number;
  /** Longest time to a complete request head, in ms. */
  headersTimeoutMs: number;
  /** Longest time to receive a whole request (head and body), in ms; at least `headersTimeoutMs`. */
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open after an answer, in ms. */
  keepAliveTimeoutMs: number;
  /** A connection with no traffic either way for this long is closed, in ms. */
  idleTimeoutMs: number;
  /** Most requests on one keep-alive connection; 0 = no limit. */
  maxRequestsPerSocket: number;
}

/**
 * The defaults of the gateway's `http.limits` (test/unit/sandbox-listener.test.ts holds them equal):
 * a demo port is reachable too, so the sandbox gets the same bounds as the gateway's own listener.
 */
export const DEFAULT_HTTP_LIMITS: HttpLimitsConfig = {
  maxConnections: 256,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 60_000,
  maxRequestsPerSocket: 1000,
};

/**
 * The fastify options that put {@link HttpLimitsConfig} on the listener: `connectionTimeout` (idle
 * socket), `keepAliveTimeout`, `requestTimeout`, `maxRequestsPerSocket`, and node's
 * `headersTimeout` through the `http` server options. The same mapping as the gateway's
 * src/listener/listener-limits.ts.
 *
 * Node checks the header and request timeouts only every `connectionsCheckingInterval` (30 s by
 * default), so a half-open connection would outlive `headersTimeoutMs` by up to 30 s; the interval
 * is set to a quarter of the header timeout (100 ms to 1 s) so it is closed close to the bound.
 */
export function listenerOptions(limits: HttpLimitsConfig) {
  const checkEveryMs = Math.max(100, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4)));
  return {
    connectionTimeout: limits.idleTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    maxRequestsPerSocket: limits.maxRequestsPerSocket,
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: checkEveryMs,
    },
  };
}

/**
 * Caps the open connections of `server` at `limits.maxConnections`: node closes a connection past
 * the cap as soon as it is accepted, before reading a byte.
 */
export function capConnections(server: Server, limits: HttpLimitsConfig): void {
  server.maxConnections = limits.maxConnections;
}
