import { readFileSync } from 'node:fs';
import * as tls from 'node:tls';
import type { Dispatcher } from 'undici';
import { ErrorCodes, GatewayError } from '../errors.js';
import { undici } from '../http-client.js';

/** Options of {@link createUpstreamDispatcher}. */
export interface UpstreamDispatcherOptions {
  /** PEM file of extra certificate authorities, added to the default ones (a site's TLS-inspecting proxy). */
  caFile?: string;
  /** HTTP(S) proxy URL without credentials (`http://proxy:3128`). */
  proxyUrl?: string;
  /**
   * `user:password` for the proxy, sent as `Proxy-Authorization: Basic …` (RFC 9110 §11.7.1).
   * Comes from a file or the environment (`upstream.proxyCredentialsFile`,
   * `SCAN_GATEWAY_PROXY_CREDENTIALS`), never from the URL in the YAML.
   */
  proxyCredentials?: string;
  /** Connect timeout and idle budget, in ms. */
  timeoutMs: number;
}

/** How long an idle keep-alive connection is kept, in ms. */
const KEEP_ALIVE_MS = 30_000;

/**
 * The default trust store plus `caFile`. Node 22.15+/23.9+ can list the default store (bundled
 * roots, NODE_EXTRA_CA_CERTS and, with --use-system-ca, the OS store); older Nodes give the bundled
 * Mozilla roots. Passing `ca` replaces the store, which is why the defaults are listed first.
 * Throws `CONFIG` when the file cannot be read or holds no certificate.
 */
export function loadCaBundle(caFile: string): string[] {
  let pem: string;
  try {
    pem = readFileSync(caFile, 'utf8');
  } catch (err) {
    throw new GatewayError(ErrorCodes.CONFIG, `upstream.caFile ${caFile} cannot be read`, {
      cause: err,
    });
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new GatewayError(ErrorCodes.CONFIG, `upstream.caFile ${caFile} holds no PEM certificate`);
  }
  const getCa = (tls as { getCACertificates?: (kind: string) => string[] }).getCACertificates;
  const defaults = typeof getCa === 'function' ? getCa('default') : [...tls.rootCertificates];
  return [...defaults, pem];
}

/**
 * The dispatcher the client owns when none is injected: keep-alive connections, a connect timeout,
 * TLS verification always on (never `rejectUnauthorized: false`), optional extra CAs and proxy.
 */
export function createUpstreamDispatcher(options: UpstreamDispatcherOptions): Dispatcher {
  const ca = options.caFile === undefined ? undefined : loadCaBundle(options.caFile);
  return new DeferredDispatcher(() => buildDispatcher(options, ca)) as unknown as Dispatcher;
}

/**
 * Built at the first request, not with the client: undici (src/http-client.ts, loaded by the
 * exchange before its first request) loads when delivery first talks to the service, after the
 * inputs opened. The CA file is read before, so a bad one still refuses the configuration at
 * build time.
 */
function buildDispatcher(options: UpstreamDispatcherOptions, ca: string[] | undefined): Dispatcher {
  const { Agent, ProxyAgent } = undici();
  const connect = { timeout: options.timeoutMs, ...(ca ? { ca } : {}) };
  const common = {
    keepAliveTimeout: KEEP_ALIVE_MS,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    connect,
  };
  if (options.proxyUrl !== undefined) {
    // requestTls: TLS to the service through the tunnel; proxyTls: TLS to an https:// proxy.
    const token =
      options.proxyCredentials === undefined
        ? {}
        : { token: `Basic ${Buffer.from(options.proxyCredentials, 'utf8').toString('base64')}` };
    return new ProxyAgent({
      ...common,
      uri: options.proxyUrl,
      requestTls: connect,
      proxyTls: connect,
      ...token,
    });
  }
  return new Agent(common);
}

/**
 * The part of undici's `Dispatcher` the client uses (undici's `request` calls `dispatch`; the client
 * closes it), standing for the real one until the first request builds it. A request after `close`
 * builds a closed one, which refuses it as undici does.
 */
class DeferredDispatcher {
  private real: Dispatcher | undefined;
  private closed = false;

  constructor(private readonly build: () => Dispatcher) {}

  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    if (this.real === undefined) {
      this.real = this.build();
      if (this.closed) void this.real.close().catch(() => undefined);
    }
    return this.real.dispatch(options, handler);
  }

  close(): Promise<void> {
    this.closed = true;
    return this.real?.close() ?? Promise.resolve();
  }

  destroy(err?: Error | null): Promise<void> {
    this.closed = true;
    return this.real?.destroy(err ?? null) ?? Promise.resolve();
  }
}
