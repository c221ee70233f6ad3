import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { z } from 'zod';
import { ErrorCodes, GatewayError, isGatewayError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import {
  MAX_DIRECT_BODY_BYTES,
  createProductRequestSchema,
  describeIssues,
  presignedUrlReadSchema,
  problemDetailsSchema,
  readScanStatus,
  productModelKeyAndNameSchema,
  productModelSchema,
  scanStatusReadSchema,
  uploadAcceptedReadSchema,
  type CreateProductRequest,
  type ProductModel,
  type ProductModelKeyAndName,
  type ScanStatus,
} from '@scan-gateway/contract';
import {
  changedSettings,
  checkAddresses,
  dispatcherOptions,
  transportKey,
  UPSTREAM_LIMITS,
  type Credentials,
  type UpstreamClientOptions,
} from './client-options.js';
import { createUpstreamDispatcher } from './dispatcher.js';
import { safeJson } from './answer-body.js';
import { exchange, parseAnswer, type Answer, type Bounds } from './exchange.js';
import { httpError, parseRetryAfter } from './http-errors.js';
import { TokenCache, type AccessToken } from './token-cache.js';
import { fetchToken } from './token-request.js';
import { authorizedCall, type CallContext } from './authorized-call.js';
import type { Clock } from '../clock.js';

export {
  clientOptionsFromConfig,
  UPSTREAM_LIMITS,
  type UpstreamClientOptions,
} from './client-options.js';

/**
 * A body read while it is sent (a batch streamed from the buffer), never whole in
 * memory: exactly `bytes` bytes, sent as `content-length`; each call of `chunks` reads it afresh.
 */
export interface StreamedBody {
  bytes: number;
  chunks(): AsyncIterable<Buffer>;
}

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
  /** What an authorized call needs of this client ({@link authorizedCall}). */
  private readonly calls: CallContext;
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
    checkAddresses(options, this.log);
    this.ownsDispatcher = options.dispatcher === undefined;
    this.dispatcher = options.dispatcher ?? createUpstreamDispatcher(dispatcherOptions(options));
    this.transport = transportKey(options);
    this.credentials = { clientId: options.clientId, clientSecret: options.clientSecret };
    this.tokens = new TokenCache(
      () => this.fetchToken(this.credentials, this.dispatcher),
      this.now,
    );
    this.calls = {
      base: this.base,
      tokens: this.tokens,
      bounds: (body, maxBytes) => this.bounds(body, maxBytes),
      exchange: (method, url, headers, body, label, bounds) =>
        this.exchange(method, url, headers, body, label, bounds),
      now: this.now,
      log: this.log,
    };
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
    const { changed, credentials, transport, newTransport, bounds } = changedSettings(
      {
        credentials: this.credentials,
        transport: this.transport,
        bounds: {
          requestTimeoutMs: this.timeoutMs,
          minUploadBytesPerSec: this.minUploadRate,
          maxAnswerBytes: this.maxAnswerBytes,
          maxProductListBytes: this.maxProductListBytes,
        },
      },
      next,
      this.ownsDispatcher,
    );
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

  /** An authorized call ({@link authorizedCall}): bearer token, one token refresh on 401, non-2xx → error. */
  private api(
    method: string,
    path: string,
    body?: string | Buffer,
    allowed: number[] = [],
    maxBytes = this.maxAnswerBytes,
  ): Promise<Answer> {
    return authorizedCall(this.calls, method, path, body, allowed, maxBytes);
  }

  /** One HTTP exchange within `bounds` ({@link exchange}), on the client's dispatcher by default. */
  private exchange(
    method: string,
    url: string,
    headers: Record<string, string>,
    body: string | Buffer | Readable | undefined,
    label: string,
    bounds: Bounds,
  ): Promise<Answer> {
    return exchange(method, url, headers, body, label, bounds, this.dispatcher, this.timeoutMs);
  }

  /** POST {authUrl}/oauth2/token (§5) with these credentials, on this dispatcher ({@link fetchToken}). */
  private fetchToken(credentials: Credentials, dispatcher: Dispatcher): Promise<AccessToken> {
    return fetchToken(credentials, dispatcher, {
      tokenUrl: this.tokenUrl,
      authUrl: this.options.authUrl,
      bounds: (body) => this.bounds(body),
      timeoutMs: this.timeoutMs,
      now: this.now,
      log: this.log,
    });
  }

  private parse<T>(schema: z.ZodType<T>, answer: Answer, operation: string): T {
    return parseAnswer(schema, answer, operation);
  }

  private retryAfter(answer: Answer): number | undefined {
    return parseRetryAfter(answer.headers['retry-after'], this.now());
  }
}
