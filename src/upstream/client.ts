import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { z } from 'zod';
import type { UpstreamConfig } from '../config/schema.js';
import { ErrorCodes, GatewayError, isGatewayError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import {
  MAX_DIRECT_BODY_BYTES,
  createProductRequestSchema,
  describeIssues,
  presignedUrlReadSchema,
  problemDetailsSchema,
  readScanStatus,
  oauthErrorSchema,
  productModelKeyAndNameSchema,
  productModelSchema,
  scanStatusReadSchema,
  uploadAcceptedReadSchema,
  type CreateProductRequest,
  type ProductModel,
  type ProductModelKeyAndName,
  type ScanStatus,
} from '@scan-gateway/contract';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { createUpstreamDispatcher, type UpstreamDispatcherOptions } from './dispatcher.js';
import { undici } from './undici-lazy.js';
import { discard, NOT_JSON, readCapped, safeJson } from './answer-body.js';
import {
  deadlineError,
  httpError,
  networkError,
  parseRetryAfter,
  redirectError,
} from './http-errors.js';
import { TokenCache, readTokenAnswer, tokenExpiry, type AccessToken } from './token-cache.js';
import { hasUrlCredentials, insecureUrlProblem } from '../config/url-policy.js';
import type { Clock } from '../clock.js';

/**
 * A body read while it is sent (a batch streamed from the buffer), never whole in
 * memory: exactly `bytes` bytes, sent as `content-length`; each call of `chunks` reads it afresh.
 */
export interface StreamedBody {
  bytes: number;
  chunks(): AsyncIterable<Buffer>;
}

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
interface Credentials {
  clientId: string;
  /** Never logged, never put in an error. */
  clientSecret: string;
}

/** The options of the dispatcher the client owns. */
function dispatcherOptions(options: UpstreamClientOptions): UpstreamDispatcherOptions {
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
function transportKey(options: UpstreamClientOptions): string {
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

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
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

/** What one exchange may take: its deadline and the most answer bytes read. */
interface Bounds {
  deadlineMs: number;
  maxBytes: number;
}

const JSON_ACCEPT = 'application/json, text/json;q=0.9, text/plain;q=0.8';
const PATHS = {
  products: '/api/product/v3/products',
  createProduct: '/api/product/v3/products/create',
  scans: '/api/trace/v3/scans',
  presigned: '/api/trace/v3/scans/preSignedUrl',
  status: (requestId: string) => `/api/trace/v3/scans/${encodeURIComponent(requestId)}/status`,
} as const;

/**
 * Client of the Battery Product and Traceability Scan Service (contract §4, §5). It authenticates
 * with OAuth 2.0 client credentials, shares one cached token between concurrent calls, validates
 * every answer against the contract and reports failures as `GatewayError`s:
 * `UPSTREAM_NETWORK` (retryable; `details.cause: 'DEADLINE'` past the whole-exchange deadline),
 * `UPSTREAM_HTTP` (retryable for 408/429/5xx, `details.status`, `details.retryAfterMs`),
 * `UPSTREAM_AUTH`, `UPSTREAM_TOKEN`, `UPSTREAM_RESPONSE`, `UPSTREAM_ANSWER_TOO_LARGE`,
 * `UPSTREAM_REDIRECT`, `BODY_TOO_LARGE`, `PRESIGNED_REFUSED`. Any failure to get a token carries
 * `details.notSent: true` and `details.stage: 'token'`: the call that needed it never left. It never
 * retries by itself (the delivery layer does), except that a 401 fetches a new token once.
 *
 * @throws GatewayError `CONFIG` from the constructor for a plain-http non-loopback `baseUrl` or
 *   `authUrl` without `allowInsecureHttp`, or a `proxyUrl` with credentials in it.
 */
export class UpstreamClient {
  private readonly base: string;
  private readonly tokenUrl: string;
  // A reload replaces these together ({@link reconfigure}); the addresses stay.
  private dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private transport: string;
  private credentials: Credentials;
  private timeoutMs: number;
  private minUploadRate: number;
  private maxAnswerBytes: number;
  private maxProductListBytes: number;
  private readonly now: Clock;
  private readonly log: Logger;
  private readonly tokens: TokenCache;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: UpstreamClientOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
    this.tokenUrl = `${options.authUrl.replace(/\/+$/, '')}/oauth2/token`;
    this.timeoutMs = options.requestTimeoutMs ?? UPSTREAM_LIMITS.requestTimeoutMs;
    this.minUploadRate = options.minUploadBytesPerSec ?? UPSTREAM_LIMITS.minUploadBytesPerSec;
    this.maxAnswerBytes = options.maxAnswerBytes ?? UPSTREAM_LIMITS.maxAnswerBytes;
    this.maxProductListBytes = options.maxProductListBytes ?? UPSTREAM_LIMITS.maxProductListBytes;
    this.now = options.now ?? Date.now;
    this.log = (options.logger ?? silentLogger()).child({ component: 'upstream' });
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
          this.log.warn(
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
    this.ownsDispatcher = options.dispatcher === undefined;
    this.dispatcher = options.dispatcher ?? createUpstreamDispatcher(dispatcherOptions(options));
    this.transport = transportKey(options);
    this.credentials = { clientId: options.clientId, clientSecret: options.clientSecret };
    this.tokens = new TokenCache(
      () => this.fetchToken(this.credentials, this.dispatcher),
      this.now,
    );
  }

  /**
   * Applies the settings a reload may change with batches in flight: the credentials (`clientId`,
   * `clientSecret`), the bounds (`requestTimeoutMs`, `minUploadBytesPerSec`, `maxAnswerBytes`,
   * `maxProductListBytes`) and the transport (`caFile` and its content, `proxyUrl`,
   * `proxyCredentials`). `baseUrl`, `authUrl` and `allowInsecureHttp` are not read: they need a
   * restart (src/config/reload.ts). New credentials or a new transport are proven first: a token
   * is fetched with them, and only then do they replace the running ones, the new token with them.
   * Calls in flight finish on the old connections, which close once they are idle.
   *
   * @returns the names of what changed (`upstream.clientSecret`…), never a value; empty when nothing did.
   * @throws GatewayError `CONFIG` (a CA file that cannot be read), or the token request's error
   *   (`UPSTREAM_AUTH` when the service refuses the new credentials, `UPSTREAM_NETWORK`…), with
   *   `details.notApplied: true`: everything running stays as it was.
   */
  async reconfigure(next: UpstreamClientOptions): Promise<string[]> {
    const changed: string[] = [];
    const credentials = { clientId: next.clientId, clientSecret: next.clientSecret };
    if (credentials.clientId !== this.credentials.clientId) changed.push('upstream.clientId');
    if (credentials.clientSecret !== this.credentials.clientSecret)
      changed.push('upstream.clientSecret');
    const transport = transportKey(next);
    const newTransport = this.ownsDispatcher && transport !== this.transport;
    if (newTransport) {
      const [before, after] = [JSON.parse(this.transport), JSON.parse(transport)] as Record<
        string,
        unknown
      >[];
      for (const key of ['caFile', 'proxyUrl', 'proxyCredentials'])
        if (!isDeepStrictEqual(before?.[key], after?.[key])) changed.push(`upstream.${key}`);
    }
    const bounds = {
      requestTimeoutMs: next.requestTimeoutMs ?? UPSTREAM_LIMITS.requestTimeoutMs,
      minUploadBytesPerSec: next.minUploadBytesPerSec ?? UPSTREAM_LIMITS.minUploadBytesPerSec,
      maxAnswerBytes: next.maxAnswerBytes ?? UPSTREAM_LIMITS.maxAnswerBytes,
      maxProductListBytes: next.maxProductListBytes ?? UPSTREAM_LIMITS.maxProductListBytes,
    };
    const running = {
      requestTimeoutMs: this.timeoutMs,
      minUploadBytesPerSec: this.minUploadRate,
      maxAnswerBytes: this.maxAnswerBytes,
      maxProductListBytes: this.maxProductListBytes,
    };
    for (const key of Object.keys(bounds) as (keyof typeof bounds)[])
      if (bounds[key] !== running[key]) changed.push(`upstream.${key}`);
    if (changed.length === 0) return [];
    const prove = credentials.clientSecret !== this.credentials.clientSecret || newTransport;
    let dispatcher = this.dispatcher;
    let token: AccessToken | undefined;
    try {
      if (newTransport) dispatcher = createUpstreamDispatcher(dispatcherOptions(next));
      if (prove || credentials.clientId !== this.credentials.clientId)
        token = await this.fetchToken(credentials, dispatcher);
    } catch (err) {
      if (dispatcher !== this.dispatcher) void dispatcher.close().catch(() => undefined);
      const code = isGatewayError(err) ? err.code : ErrorCodes.UPSTREAM_TOKEN;
      throw new GatewayError(
        code,
        `the changed upstream settings (${changed.join(', ')}) were not applied, the running ones stay: ${(err as Error).message}`,
        { cause: err, details: { notApplied: true, changed } },
      );
    }
    const old = this.dispatcher;
    this.dispatcher = dispatcher;
    this.transport = transport;
    this.credentials = credentials;
    this.timeoutMs = bounds.requestTimeoutMs;
    this.minUploadRate = bounds.minUploadBytesPerSec;
    this.maxAnswerBytes = bounds.maxAnswerBytes;
    this.maxProductListBytes = bounds.maxProductListBytes;
    if (token) this.tokens.replace(token, this.now());
    // close() lets the requests in flight on the old connections finish first.
    if (old !== dispatcher) void old.close().catch(() => undefined);
    this.log.info({ changed }, 'upstream settings applied without a restart');
    return changed;
  }

  /** GET /api/product/v3/products (§4.1): the customer's products. */
  async listProducts(): Promise<ProductModelKeyAndName[]> {
    const answer = await this.api('GET', PATHS.products, undefined, [], this.maxProductListBytes);
    return this.parse(productModelKeyAndNameSchema.array(), answer, 'listProducts');
  }

  /** POST /api/product/v3/products/create (§4.2): a new product with its template defaults. */
  async createProduct(req: CreateProductRequest): Promise<ProductModel> {
    const checked = createProductRequestSchema.safeParse(req);
    if (!checked.success) {
      throw new GatewayError(ErrorCodes.USAGE, `createProduct: ${describeIssues(checked.error)}`);
    }
    const answer = await this.api('POST', PATHS.createProduct, JSON.stringify(checked.data));
    return this.parse(productModelSchema, answer, 'createProduct');
  }

  /**
   * POST /api/trace/v3/scans (§4.3). `body` is the already serialized JSON array of scans, sent
   * byte for byte. Throws `BODY_TOO_LARGE` without sending when it exceeds
   * {@link MAX_DIRECT_BODY_BYTES} (a 413 answer is `UPSTREAM_HTTP` with status 413).
   */
  async uploadScans(body: string | Buffer): Promise<{ requestId: string }> {
    const bytes = typeof body === 'string' ? Buffer.byteLength(body, 'utf8') : body.length;
    if (bytes > MAX_DIRECT_BODY_BYTES) {
      throw new GatewayError(
        ErrorCodes.BODY_TOO_LARGE,
        `scan batch of ${bytes} bytes reaches the 5.8 MiB direct upload limit (largest allowed ${MAX_DIRECT_BODY_BYTES})`,
        { details: { bytes, limit: MAX_DIRECT_BODY_BYTES } },
      );
    }
    const answer = await this.api('POST', PATHS.scans, body);
    const accepted = this.parse(uploadAcceptedReadSchema, answer, 'uploadScans');
    return { requestId: accepted.requestId };
  }

  /** POST /api/trace/v3/scans/preSignedUrl (§4.4): an address valid 30 minutes, usable once. */
  async requestPresignedUpload(): Promise<{ url: string; requestId: string }> {
    const answer = await this.api('POST', PATHS.presigned);
    const presigned = this.parse(presignedUrlReadSchema, answer, 'requestPresignedUpload');
    try {
      new URL(presigned.url);
    } catch {
      throw new GatewayError(
        ErrorCodes.UPSTREAM_RESPONSE,
        'requestPresignedUpload: response field url is not an absolute URL',
      );
    }
    return { url: presigned.url, requestId: presigned.requestId };
  }

  /**
   * PUT {pre-signed url} (§4.5), without Authorization. A 403 (used already, expired) throws
   * `PRESIGNED_REFUSED`: a new address and requestId are needed.
   */
  async putPresigned(url: string, body: string | Buffer): Promise<void> {
    await this.put(url, body, this.bounds(body), {});
  }

  /**
   * {@link putPresigned} with a body streamed from the buffer: `body.bytes` is sent as
   * `content-length`, and undici fails the request (a network error, retried by delivery) when
   * the stream gives more or fewer bytes. The deadline grows with `body.bytes` as for a string.
   */
  async putPresignedStream(url: string, body: StreamedBody): Promise<void> {
    await this.put(
      url,
      Readable.from(body.chunks(), { objectMode: false }),
      this.boundsOf(body.bytes),
      { 'content-length': String(body.bytes) },
    );
  }

  private async put(
    url: string,
    body: string | Buffer | Readable,
    bounds: Bounds,
    headers: Record<string, string>,
  ): Promise<void> {
    const started = this.now();
    const answer = await this.exchange(
      'PUT',
      url,
      { 'content-type': 'application/json', ...headers },
      body,
      'PUT <pre-signed url>',
      bounds,
    );
    this.log.debug(
      { status: answer.status, ms: this.now() - started },
      'pre-signed upload answered',
    );
    if (answer.status >= 200 && answer.status < 300) return;
    if (answer.status === 403) {
      throw new GatewayError(
        ErrorCodes.PRESIGNED_REFUSED,
        'the pre-signed address was refused (used already or expired)',
        {
          details: { status: 403, body: answer.text.slice(0, 2048) },
        },
      );
    }
    throw httpError('PUT', '<pre-signed url>', answer.status, answer.text, this.retryAfter(answer));
  }

  /**
   * GET /api/trace/v3/scans/{requestId}/status (§4.6), with `requestId` as a string. Unknown ids
   * give state `NotFound`, whether the service says so with 200 or with a 404 whose body is a
   * status or ProblemDetails. Any other 404 (an HTML page, "no such route") is an error: it more
   * likely means a wrong `baseUrl`, and reading it as NotFound would make delivery send again.
   */
  async getScanStatus(requestId: string): Promise<ScanStatus> {
    const answer = await this.api('GET', PATHS.status(requestId), undefined, [404]);
    if (answer.status === 404) {
      const body = safeJson(answer.text);
      const wire = scanStatusReadSchema.safeParse(body);
      if (wire.success && wire.data.state === 'NotFound')
        return readScanStatus(wire.data, requestId);
      const problem = problemDetailsSchema.safeParse(body);
      if (!wire.success && problem.success && problem.data.status === 404) {
        return {
          state: 'NotFound',
          requestId,
          description: problem.data.detail ?? problem.data.title ?? '',
          processed: 0,
        };
      }
      throw httpError('GET', PATHS.status(requestId), 404, answer.text, undefined);
    }
    return readScanStatus(this.parse(scanStatusReadSchema, answer, 'getScanStatus'), requestId);
  }

  /** When the cached token expires and how many tokens were obtained. Never the token itself. */
  tokenInfo(): { expiresAt?: Date; refreshes: number } {
    return this.tokens.info();
  }

  /** Closes the connections the client owns. Safe to call more than once. */
  close(): Promise<void> {
    this.closing ??= this.ownsDispatcher ? this.dispatcher.close() : Promise.resolve();
    return this.closing;
  }

  /**
   * A token for a call that has not been sent yet: a failure to get one (the auth server down,
   * the secret refused) is marked `notSent`, since the call itself never left.
   */
  private async bearer(): Promise<string> {
    try {
      return await this.tokens.get();
    } catch (err) {
      if (isGatewayError(err)) {
        err.details.notSent = true;
        err.details.stage = 'token';
        throw err;
      }
      // Not one of ours (a bug): still, nothing was sent.
      throw new GatewayError(
        ErrorCodes.UPSTREAM_TOKEN,
        `token request failed: ${(err as Error).message}`,
        {
          cause: err,
          retryable: true,
          details: { notSent: true, stage: 'token' },
        },
      );
    }
  }

  /** The bounds of an exchange: the deadline grows with the body to send; answers are capped at `maxBytes`. */
  private bounds(body: string | Buffer | undefined, maxBytes = this.maxAnswerBytes): Bounds {
    return this.boundsOf(
      body === undefined
        ? 0
        : typeof body === 'string'
          ? Buffer.byteLength(body, 'utf8')
          : body.length,
      maxBytes,
    );
  }

  /** The deadline of a request sending `bytes` bytes (`minUploadRate`), and the answer's size limit. */
  private boundsOf(bytes: number, maxBytes = this.maxAnswerBytes): Bounds {
    return {
      deadlineMs: this.timeoutMs + Math.ceil((bytes / this.minUploadRate) * 1000),
      maxBytes,
    };
  }

  /** An authorized call: bearer token, one token refresh on 401, non-2xx → error. */
  private async api(
    method: string,
    path: string,
    body?: string | Buffer,
    allowed: number[] = [],
    maxBytes = this.maxAnswerBytes,
  ): Promise<Answer> {
    const headers: Record<string, string> = { accept: JSON_ACCEPT };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const started = this.now();
    const token = await this.bearer();
    const bounds = this.bounds(body, maxBytes);
    let answer = await this.exchange(
      method,
      this.base + path,
      { ...headers, authorization: `Bearer ${token}` },
      body,
      `${method} ${path}`,
      bounds,
    );
    if (answer.status === 401) {
      this.log.info({ path }, 'access token refused, requesting a new one');
      this.tokens.invalidate(token);
      const fresh = await this.bearer();
      answer = await this.exchange(
        method,
        this.base + path,
        { ...headers, authorization: `Bearer ${fresh}` },
        body,
        `${method} ${path}`,
        bounds,
      );
      if (answer.status === 401) {
        throw new GatewayError(
          ErrorCodes.UPSTREAM_AUTH,
          `${method} ${path} answered 401 with a freshly obtained token`,
          {
            details: { status: 401, method, path },
          },
        );
      }
    }
    this.log.debug(
      { method, path, status: answer.status, ms: this.now() - started },
      'upstream answered',
    );
    if ((answer.status >= 200 && answer.status < 300) || allowed.includes(answer.status))
      return answer;
    throw httpError(method, path, answer.status, answer.text, this.retryAfter(answer));
  }

  /**
   * One HTTP exchange within `bounds`: the whole of it (connect, headers, every byte of the
   * answer) under one deadline (`AbortSignal.timeout`), the answer read up to `bounds.maxBytes`.
   * Redirects are never followed (undici's `request` does not, and no redirect interceptor is
   * installed): a 3xx is `UPSTREAM_REDIRECT`, so a token never goes to another address.
   *
   * @throws GatewayError `UPSTREAM_NETWORK` (transport failure, `details.cause: 'DEADLINE'` when the
   *   deadline passed), `UPSTREAM_REDIRECT` (3xx), `UPSTREAM_ANSWER_TOO_LARGE` (a 2xx answer over the
   *   cap). An error answer (4xx/5xx) over the cap is cut at the cap and returned.
   */
  private async exchange(
    method: string,
    url: string,
    headers: Record<string, string>,
    body: string | Buffer | Readable | undefined,
    label: string,
    bounds: Bounds,
    dispatcher: Dispatcher = this.dispatcher,
  ): Promise<Answer> {
    const target = label.replace(/^\S+ /, '');
    const signal = AbortSignal.timeout(bounds.deadlineMs);
    let res: Dispatcher.ResponseData;
    try {
      res = await undici().request(url, {
        method: method as Dispatcher.HttpMethod,
        headers,
        ...(body !== undefined ? { body } : {}),
        dispatcher,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        signal,
      });
    } catch (err) {
      throw signal.aborted
        ? deadlineError(method, target, bounds.deadlineMs, err)
        : networkError(method, target, err);
    }
    const status = res.statusCode;
    if (status >= 300 && status < 400) {
      discard(res.body);
      throw redirectError(method, target, status, res.headers.location);
    }
    let read: { text: string; truncated: boolean };
    try {
      read = await readCapped(res.body, bounds.maxBytes, res.headers['content-length']);
    } catch (err) {
      throw signal.aborted
        ? deadlineError(method, target, bounds.deadlineMs, err)
        : networkError(method, target, err);
    }
    if (read.truncated && status >= 200 && status < 300) {
      throw new GatewayError(
        ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE,
        `${method} ${target} answered HTTP ${status} with more than ${bounds.maxBytes} bytes; stopped reading`,
        { details: { status, method, path: target, limit: bounds.maxBytes } },
      );
    }
    return { status, headers: res.headers, text: read.text };
  }

  /**
   * POST {authUrl}/oauth2/token (§5). Every failure here is a failure to get a token; `bearer()`
   * marks it `notSent` for the caller. A 2xx answer that holds no usable token is
   * `UPSTREAM_TOKEN` (never `UPSTREAM_RESPONSE`, which delivery reads as "upload accepted").
   */
  private async fetchToken(credentials: Credentials, dispatcher: Dispatcher): Promise<AccessToken> {
    const form = new URLSearchParams({
      client_id: credentials.clientId,
      client_secret: credentials.clientSecret,
      grant_type: 'client_credentials',
    }).toString();
    const headers = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    let answer: Answer;
    try {
      answer = await this.exchange(
        'POST',
        this.tokenUrl,
        headers,
        form,
        'POST /oauth2/token',
        this.bounds(form),
        dispatcher,
      );
    } catch (err) {
      if (isGatewayError(err, ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE)) {
        throw new GatewayError(ErrorCodes.UPSTREAM_TOKEN, `token request: ${err.message}`, {
          cause: err,
          retryable: true,
          details: { ...err.details },
        });
      }
      throw err;
    }
    if (answer.status === 400 || answer.status === 401 || answer.status === 403) {
      const oauth = oauthErrorSchema.safeParse(safeJson(answer.text));
      const reason = oauth.success ? oauth.data.error : undefined;
      throw new GatewayError(
        ErrorCodes.UPSTREAM_AUTH,
        `token request for client ${credentials.clientId} refused with HTTP ${answer.status}${reason ? ` (${reason})` : ''}`,
        { details: { status: answer.status, ...(reason ? { error: reason } : {}) } },
      );
    }
    if (answer.status < 200 || answer.status >= 300) {
      throw httpError('POST', '/oauth2/token', answer.status, answer.text, this.retryAfter(answer));
    }
    // Read without echoing the body anywhere: it holds the token.
    const json = safeJson(answer.text);
    const token = json === NOT_JSON ? { problem: 'the answer is not JSON' } : readTokenAnswer(json);
    if ('problem' in token) {
      throw new GatewayError(
        ErrorCodes.UPSTREAM_TOKEN,
        `token response from ${this.options.authUrl} cannot be used: ${token.problem}`,
        {
          retryable: true,
          details: { status: answer.status, contentType: answer.headers['content-type'] },
        },
      );
    }
    const expiresAtMs = tokenExpiry(token, this.now());
    this.log.info(
      { clientId: credentials.clientId, expiresAt: new Date(expiresAtMs).toISOString() },
      'obtained access token',
    );
    return { value: token.access_token, expiresAtMs };
  }

  private parse<T>(schema: z.ZodType<T>, answer: Answer, operation: string): T {
    const json = safeJson(answer.text);
    if (json === NOT_JSON) {
      throw new GatewayError(
        ErrorCodes.UPSTREAM_RESPONSE,
        `${operation}: response body is not JSON`,
        {
          details: {
            status: answer.status,
            contentType: answer.headers['content-type'],
            body: answer.text.slice(0, 2048),
          },
        },
      );
    }
    const result = schema.safeParse(json);
    if (!result.success) {
      throw new GatewayError(
        ErrorCodes.UPSTREAM_RESPONSE,
        `${operation}: unexpected response: ${describeIssues(result.error, 'response')}`,
        {
          details: {
            status: answer.status,
            fields: result.error.issues.map((i) => i.path.join('.')),
          },
        },
      );
    }
    return result.data;
  }

  private retryAfter(answer: Answer): number | undefined {
    return parseRetryAfter(answer.headers['retry-after'], this.now());
  }
}
