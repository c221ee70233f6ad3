/*
 * The bounds of a local HTTP listener, shared by the daemon (its health/ingest server, from
 * `http.limits`) and the sandbox (its demo port): one set of fields, one set of defaults, one
 * mapping onto fastify and node, so neither restates the other's.
 */
import type { Server } from 'node:http';
import type { Server as TlsServer } from 'node:tls';

/** Timeouts and connection cap of a local HTTP listener. Times in ms. */
export interface ListenerLimits {
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
 * The defaults of {@link ListenerLimits}: the daemon's `http.limits` takes them as its defaults,
 * and the sandbox's port, reachable too, gets the same bounds.
 */
export const LISTENER_LIMIT_DEFAULTS: Readonly<ListenerLimits> = Object.freeze({
  maxConnections: 256,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 60_000,
  maxRequestsPerSocket: 1000,
});

/**
 * The fastify options that put {@link ListenerLimits} on a listener: `connectionTimeout` (idle
 * socket), `keepAliveTimeout`, `requestTimeout`, `maxRequestsPerSocket`, and node's
 * `headersTimeout` through the `http` server options.
 *
 * Node checks the header and request timeouts only every `connectionsCheckingInterval` (30 s by
 * default), so a half-open connection would outlive `headersTimeoutMs` by up to 30 s; the interval
 * is set to a quarter of the header timeout (100 ms to 1 s) so it is closed close to the bound.
 */
export function listenerOptions(limits: ListenerLimits) {
  return {
    connectionTimeout: limits.idleTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    maxRequestsPerSocket: limits.maxRequestsPerSocket,
    http: nodeServerLimits(limits),
  };
}

function nodeServerLimits(limits: ListenerLimits) {
  const checkEveryMs = Math.max(100, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4)));
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: checkEveryMs,
  };
}

/**
 * Caps the open connections of `server` at `limits.maxConnections`: node closes a connection past
 * the cap as soon as it is accepted, before reading a byte (no answer: nothing is parsed yet), and
 * `onDrop` hears of it with the peer's address.
 */
export function capConnections(
  server: Server | TlsServer,
  limits: Pick<ListenerLimits, 'maxConnections'>,
  onDrop?: (remote: string) => void,
): void {
  server.maxConnections = limits.maxConnections;
  if (onDrop)
    server.on('drop', (data?: { remoteAddress?: string }) =>
      onDrop(data?.remoteAddress ?? 'unknown'),
    );
}
