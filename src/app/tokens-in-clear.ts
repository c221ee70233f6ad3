import { isLoopbackHost } from '../listener/host-check.js';
import { inputKind } from '../inputs/registry.js';
import type { GatewayConfig } from '../config/schema.js';
import type { Gateway } from './gateway.js';
import { splitListen } from './part-helpers.js';

// Apart from src/app/http.ts: the status reads it from the start, while the server (and fastify
// with it) is loaded only when the HTTP part starts.
/**
 * The tokens that guard a server reachable beyond loopback over plain HTTP (no `http.tls`): the
 * read token, the admin token and each http input's ingest token, named for the warning and the
 * health hint. Empty on loopback or with TLS.
 */
export function tokensInClear(g: {
  readonly config: Pick<GatewayConfig, 'http' | 'inputs'>;
  readonly serverTokens: Gateway['serverTokens'];
}): string[] {
  const { config, serverTokens } = g;
  if (config.http.tls || isLoopbackHost(splitListen(config.http.listen).host)) return [];
  return [
    ...(serverTokens.read.configured() ? ['read token'] : []),
    ...(serverTokens.admin.configured() ? ['admin token'] : []),
    ...config.inputs
      .filter((i) => inputKind(i).localRoutes === true)
      .map((i) => `ingest token of input ${i.id}`),
  ];
}
