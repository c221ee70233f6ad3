import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import type { Dispatcher } from 'undici';
import type { UpstreamConfig } from '../config/schema.js';
import { hasUrlCredentials, insecureUrlProblem } from '../config/url-policy.js';
import { ErrorCodes, GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';
import type { UpstreamDispatcherOptions } from './dispatcher.js';

/** Options of {@link UpstreamClient}. */
export interface UpstreamClientOptions {
  /** Base address of the service; the contract's paths (§4) are appended. */
  baseUrl: string;
  /** Base address of the token endpoint; `/oauth2/token` is appended (§5). */
  authUrl: string;
  clientId: string;
  /** Never logged, never put in an error. */
  clientSecret: string;
  logger?: Logger;
  /** Injected transport (tests, a shared agent). Not closed by `close()`. Without it, the client owns one. */
  dispatcher?: Dispatcher;
  /** PEM file of extra CAs, added to the default store. Ignored when `dispatcher` is given. */
  caFile?: string;
  /** HTTP(S) proxy, without credentials in it. Ignored when `dispatcher` is given. */
  proxyUrl?: string;
  /** `user:password` for the proxy (Basic), from a file or the environment. Ignored when `dispatcher` is given. */
  proxyCredentials?: string;
  /**
   * Deadline of one whole exchange (connect, headers and the complete answer body), in ms; also the
   * connect, headers and body inactivity timeouts. A request with a body gets in addition the time
   * to send it at `minUploadBytesPerSec`. Default 30 000.
   */
  requestTimeoutMs?: number;
  /** Slowest upload rate still allowed to finish, in bytes per second; lengthens the deadline of uploads. Default 32 768. */
  minUploadBytesPerSec?: number;
  /** Most bytes of any answer read (token, upload, status, create, error bodies), default 1 MiB. */
  maxAnswerBytes?: number;
  /** Most bytes of the product list answer (§4.1, a list of every product), default 16 MiB. */
  maxProductListBytes?: number;
  /** Allow plain `http` to a non-loopback `baseUrl`/`authUrl` (a lab without TLS). Default false. */
  allowInsecureHttp?: boolean;
  /** Clock in ms since epoch, for token expiry and Retry-After dates. Default `Date.now`. */
  now?: Clock;
}

/** Who the client is at the token endpoint (§5). */
export interface Credentials {
  clientId: string;
  /** Never logged, never put in an error. */
  clientSecret: string;
}

/** The bounds of one exchange a reload may change, defaults applied. */
export interface ClientBounds {
  requestTimeoutMs: number;
  minUploadBytesPerSec: number;
  maxAnswerBytes: number;
  maxProductListBytes: number;
}

/** The options of the dispatcher the client owns. */
export function dispatcherOptions(options: UpstreamClientOptions): UpstreamDispatcherOptions {
  return {
    timeoutMs: options.requestTimeoutMs ?? UPSTREAM_LIMITS.requestTimeoutMs,
    ...(options.caFile !== undefined ? { caFile: options.caFile } : {}),
    ...(options.proxyUrl !== undefined ? { proxyUrl: options.proxyUrl } : {}),
    ...(options.proxyCredentials !== undefined
      ? { proxyCredentials: options.proxyCredentials }
      : {}),
  };
}

/**
 * What the owned dispatcher is built from, as one comparable text: a CA file rewritten in place
 * counts as a change (its content is part of it, by hash). Holds no secret in clear.
 */
export function transportKey(options: UpstreamClientOptions): string {
  let ca: string | undefined;
  if (options.caFile !== undefined) {
    try {
      ca = createHash('sha256').update(readFileSync(options.caFile)).digest('hex');
    } catch {
      ca = 'unreadable';
    }
  }
  const proxyCredentials =
    options.proxyCredentials === undefined
      ? undefined
      : createHash('sha256').update(options.proxyCredentials).digest('hex');
  return JSON.stringify({
    caFile: options.caFile === undefined ? undefined : [options.caFile, ca],
    proxyUrl: options.proxyUrl,
    proxyCredentials,
    requestTimeoutMs: options.requestTimeoutMs ?? UPSTREAM_LIMITS.requestTimeoutMs,
  });
}
/**
 * The client options for the `upstream` section of the configuration and the secrets read beside
 * it (the one mapping, for the daemon and the commands alike).
 */
export function clientOptionsFromConfig(
  upstream: UpstreamConfig,
  secrets: { clientSecret: string; proxyCredentials?: string | undefined },
  logger?: Logger,
): UpstreamClientOptions {
  return {
    baseUrl: upstream.baseUrl,
    authUrl: upstream.authUrl,
    clientId: upstream.clientId,
    clientSecret: secrets.clientSecret,
    requestTimeoutMs: upstream.requestTimeoutMs,
    minUploadBytesPerSec: upstream.minUploadBytesPerSec,
    maxAnswerBytes: upstream.maxAnswerBytes,
    maxProductListBytes: upstream.maxProductListBytes,
    allowInsecureHttp: upstream.allowInsecureHttp,
    ...(logger ? { logger } : {}),
    ...(upstream.caFile ? { caFile: upstream.caFile } : {}),
    ...(upstream.proxyUrl ? { proxyUrl: upstream.proxyUrl } : {}),
    ...(secrets.proxyCredentials !== undefined
      ? { proxyCredentials: secrets.proxyCredentials }
      : {}),
  };
}

/** Defaults of the bounds on one exchange (docs/upstream.md, "Bounds"). */
export const UPSTREAM_LIMITS = {
  requestTimeoutMs: 30_000,
  minUploadBytesPerSec: 32 * 1024,
  maxAnswerBytes: 1024 * 1024,
  maxProductListBytes: 16 * 1024 * 1024,
} as const;

/**
 * Checks the addresses of `options` as the constructor of {@link UpstreamClient} does: plain http
 * to a non-loopback address is refused unless `allowInsecureHttp` (then warned about), and a
 * `proxyUrl` may not carry credentials.
 *
 * @throws GatewayError `CONFIG` naming the key.
 */
export function checkAddresses(options: UpstreamClientOptions, log: Logger): void {
  if (!options.allowInsecureHttp) {
    for (const key of ['baseUrl', 'authUrl'] as const) {
      const problem = insecureUrlProblem(options[key]);
      if (problem)
        throw new GatewayError(ErrorCodes.CONFIG, `upstream.${key} ${problem}`, {
          details: { key: `upstream.${key}` },
        });
    }
  } else {
    for (const key of ['baseUrl', 'authUrl'] as const) {
      if (insecureUrlProblem(options[key])) {
        log.warn(
          { key: `upstream.${key}`, url: options[key] },
          'upstream.allowInsecureHttp is on: the client secret and access tokens go over plain http, readable on the network (lab use only)',
        );
      }
    }
  }
  if (options.proxyUrl !== undefined && hasUrlCredentials(options.proxyUrl)) {
    throw new GatewayError(
      ErrorCodes.CONFIG,
      'upstream.proxyUrl must not carry user:password@; put them in upstream.proxyCredentialsFile or SCAN_GATEWAY_PROXY_CREDENTIALS',
      {
        details: { key: 'upstream.proxyUrl' },
      },
    );
  }
}

/** The bounds of `options`, each default applied. */
export function boundsOf(options: UpstreamClientOptions): ClientBounds {
  return {
    requestTimeoutMs: options.requestTimeoutMs ?? UPSTREAM_LIMITS.requestTimeoutMs,
    minUploadBytesPerSec: options.minUploadBytesPerSec ?? UPSTREAM_LIMITS.minUploadBytesPerSec,
    maxAnswerBytes: options.maxAnswerBytes ?? UPSTREAM_LIMITS.maxAnswerBytes,
    maxProductListBytes: options.maxProductListBytes ?? UPSTREAM_LIMITS.maxProductListBytes,
  };
}

/** What a reload changes of the running client ({@link changedSettings}). */
export interface SettingsChange {
  /** The names of what changed (`upstream.clientSecret`…), never a value. */
  changed: string[];
  credentials: Credentials;
  /** The transport key of `next` ({@link transportKey}). */
  transport: string;
  /** A new dispatcher is needed (the client owns its dispatcher and its transport changed). */
  newTransport: boolean;
  bounds: ClientBounds;
}

/**
 * Compares the settings a reload may change (credentials, transport, bounds) of `next` with the
 * running ones, in the order {@link UpstreamClient.reconfigure} names them.
 */
export function changedSettings(
  running: { credentials: Credentials; transport: string; bounds: ClientBounds },
  next: UpstreamClientOptions,
  ownsDispatcher: boolean,
): SettingsChange {
  const changed: string[] = [];
  const credentials = { clientId: next.clientId, clientSecret: next.clientSecret };
  if (credentials.clientId !== running.credentials.clientId) changed.push('upstream.clientId');
  if (credentials.clientSecret !== running.credentials.clientSecret)
    changed.push('upstream.clientSecret');
  const transport = transportKey(next);
  const newTransport = ownsDispatcher && transport !== running.transport;
  if (newTransport) {
    const [before, after] = [JSON.parse(running.transport), JSON.parse(transport)] as Record<
      string,
      unknown
    >[];
    for (const key of ['caFile', 'proxyUrl', 'proxyCredentials'])
      if (!isDeepStrictEqual(before?.[key], after?.[key])) changed.push(`upstream.${key}`);
  }
  const bounds = boundsOf(next);
  for (const key of Object.keys(bounds) as (keyof typeof bounds)[])
    if (bounds[key] !== running.bounds[key]) changed.push(`upstream.${key}`);
  return { changed, credentials, transport, newTransport, bounds };
}
