import { listenerOptions } from '@scan-gateway/service-kit/listener-limits';
import type { HttpLimitsConfig } from '../config/schema.js';

/*
 * The fields, defaults and mapping of a listener's bounds are shared with the sandbox
 * (packages/service-kit/src/listener-limits.ts); here only what the daemon adds: TLS.
 */
export { capConnections, listenerOptions } from '@scan-gateway/service-kit/listener-limits';

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
