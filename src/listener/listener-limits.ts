import type { Server } from 'node:http';
import type { Server as TlsServer } from 'node:tls';
import type { HttpLimitsConfig } from '../config/schema.js';

/**
 * The fastify options that put {@link HttpLimitsConfig} on a listener (health/ingest server and
 * sandbox): `connectionTimeout` (idle socket), `keepAliveTimeout`, `requestTimeout`,
 * `maxRequestsPerSocket`, and node's `headersTimeout` through the `http` server options.
 *
 * Node checks the header and request timeouts only every `connectionsCheckingInterval` (30 s by
 * default), so a half-open connection would outlive `headersTimeoutMs` by up to 30 s; the interval
 * is set to a quarter of the header timeout (100 ms to 1 s) so it is closed close to the bound.
 */
export function listenerOptions(limits: HttpLimitsConfig) {
  return {
    connectionTimeout: limits.idleTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    maxRequestsPerSocket: limits.maxRequestsPerSocket,
    http: nodeServerLimits(limits),
  };
}

/**
 * {@link listenerOptions} for an https listener: fastify hands its `http` options only to a plain
 * server, so the same node limits go into `https` beside the TLS options. The handshake deadline
 * (`tlsHandshakeTimeoutMs`) is enforced by the connection guard, which knows the peer's address
 * (connection-guard.ts); node's own handshake timeout (120 s by default) is set a second past it,
 * only as a backstop.
 */
export function tlsListenerOptions<T extends object>(limits: HttpLimitsConfig, tls: T) {
  const { http, ...rest } = listenerOptions(limits);
  return {
    ...rest,
    https: { ...tls, ...http, handshakeTimeout: limits.tlsHandshakeTimeoutMs + 1000 },
  };
}

function nodeServerLimits(limits: HttpLimitsConfig) {
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
  limits: HttpLimitsConfig,
  onDrop?: (remote: string) => void,
): void {
  server.maxConnections = limits.maxConnections;
  if (onDrop)
    server.on('drop', (data?: { remoteAddress?: string }) =>
      onDrop(data?.remoteAddress ?? 'unknown'),
    );
}
