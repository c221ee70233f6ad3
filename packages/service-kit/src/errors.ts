/**
 * One error class for the whole gateway, with a stable `code` that callers branch on
 * (`SCANGW_E_…`), an optional `cause`, and whether retrying the same operation can succeed.
 * Every code is listed in `docs/errors.md` (generated from src/error-catalogue.ts).
 *
 * Kinds are codes, and callers ask with the predicates below (`isQuotaRefusal(err)`,
 * `isDiskFull(err)`, `isNotSent(err)`…), never with ad-hoc `details` flags. `details` carries
 * facts for logs and for the few properties that cut across codes (an upstream call that never
 * left: `notSent`, any code); those are typed in {@link GatewayErrorDetails}.
 * Outside tests, nothing in src/ or in the sources of packages/ throws a plain `Error`
 * (test/unit/errors-model.test.ts). It lives in this package, not in the daemon's src/, because
 * the sandbox throws the same errors the daemon's CLI branches on (`SECRET`, `CONFIG`, `LISTEN`).
 */
export const ErrorCodes = {
  /** The configuration file is missing, unreadable, not YAML, or fails validation. */
  CONFIG: 'SCANGW_E_CONFIG',
  /** A secret (client secret, token) could not be read from the environment or its file. */
  SECRET: 'SCANGW_E_SECRET',
  /** The upstream service could not be reached (DNS, connect, reset, timeout). Retryable. */
  UPSTREAM_NETWORK: 'SCANGW_E_UPSTREAM_NETWORK',
  /** The upstream service answered with an HTTP error status. Retryable for 408, 429 and 5xx. */
  UPSTREAM_HTTP: 'SCANGW_E_UPSTREAM_HTTP',
  /** The upstream service answered 401 even with a fresh token, or the token request was refused. */
  UPSTREAM_AUTH: 'SCANGW_E_UPSTREAM_AUTH',
  /** The upstream answer did not have the shape the contract describes. */
  UPSTREAM_RESPONSE: 'SCANGW_E_UPSTREAM_RESPONSE',
  /**
   * The token endpoint answered 2xx with something that is not a usable token (not JSON, no
   * access token, a token type other than Bearer). The call that needed the token was not sent.
   */
  UPSTREAM_TOKEN: 'SCANGW_E_UPSTREAM_TOKEN',
  /** An upstream answer was larger than the byte cap for its kind; the client stopped reading it. */
  UPSTREAM_ANSWER_TOO_LARGE: 'SCANGW_E_UPSTREAM_ANSWER_TOO_LARGE',
  /** The upstream answered with a redirect (3xx); redirects are never followed (the token would go along). */
  UPSTREAM_REDIRECT: 'SCANGW_E_UPSTREAM_REDIRECT',
  /** A request body reached the 5.8 MiB limit of the direct upload (contract §4.3, §8). */
  BODY_TOO_LARGE: 'SCANGW_E_BODY_TOO_LARGE',
  /** A pre-signed address was refused (used already, or expired; contract §4.4–4.5). */
  PRESIGNED_REFUSED: 'SCANGW_E_PRESIGNED_REFUSED',
  /** The SQLite buffer could not be opened or written (locked, an I/O error, permissions). */
  BUFFER: 'SCANGW_E_BUFFER',
  /**
   * The buffer cannot be opened at all and time will not help (corrupt, not a database, a newer
   * schema, no permission): `run` exits 4 (docs/cli.md), which systemd does not restart.
   */
  BUFFER_UNOPENABLE: 'SCANGW_E_BUFFER_UNOPENABLE',
  /** The disk or file system failed to read or write the buffer (SQLite `SQLITE_IOERR`): check the disk. Retryable. */
  BUFFER_IO: 'SCANGW_E_BUFFER_IO',
  /**
   * A command met a damaged buffer, or a file that is no gateway buffer (SQLite `SQLITE_CORRUPT`, a
   * table missing) after it opened: the CLI exits 4, as for `SCANGW_E_BUFFER_UNOPENABLE`.
   */
  BUFFER_DAMAGED: 'SCANGW_E_BUFFER_DAMAGED',
  /** The disk of the buffer (or SQLite's `max_page_count`) is full: nothing was written. Retryable. */
  BUFFER_DISK_FULL: 'SCANGW_E_BUFFER_DISK_FULL',
  /** A commit adding scans was refused: the buffer quota is reached. Nothing was written; the source keeps it. Retryable. */
  BUFFER_QUOTA: 'SCANGW_E_BUFFER_QUOTA',
  /** One submit alone is larger than the whole buffer quota and will never be taken. Also a quota refusal. */
  BUFFER_TOO_LARGE: 'SCANGW_E_BUFFER_TOO_LARGE',
  /** An input could not be opened or failed while running. */
  INPUT: 'SCANGW_E_INPUT',
  /** A command-line usage error (also a bad admin request body: HTTP 400). */
  USAGE: 'SCANGW_E_USAGE',
  /** The part asked is not running (not started yet, stopping, or removed by a reload); nothing was done. */
  NOT_RUNNING: 'SCANGW_E_NOT_RUNNING',
  /** An HTTP server of the gateway (health, ingest) could not listen on its configured address. */
  LISTEN: 'SCANGW_E_LISTEN',
  /**
   * The local server's TLS files (`http.tls`) cannot be read, are not PEM, the key does not match
   * the certificate, or the certificate has not begun yet: at start the gateway does not start; on
   * a reload the running certificate stays.
   */
  LISTENER_TLS: 'SCANGW_E_LISTENER_TLS',
  /** High availability: etcd cannot be reached, refused the login or answered an error. The lease is renewed by the next attempt; a leader past its deadline stops taking reads. */
  HA_ETCD: 'SCANGW_E_HA_ETCD',
  /** High availability: this node does not hold the leader lease (a standby, or a leader fenced past its deadline): it takes no read; the source keeps it for the leader. Retryable. */
  HA_NOT_LEADER: 'SCANGW_E_HA_NOT_LEADER',
  /** The sandbox's Kafka broker met a frame it cannot read, or could not make its certificates. */
  SANDBOX_KAFKA: 'SCANGW_E_SANDBOX_KAFKA',
  /** Stopping failed for some part, or took longer than the stop deadline. */
  STOP: 'SCANGW_E_STOP',
  /** Status events (contract §6): the Kafka brokers cannot be reached (DNS, connect, reset, timeout). Polling takes over. */
  EVENTS_NETWORK: 'SCANGW_E_EVENTS_NETWORK',
  /** Status events: the brokers' TLS certificate is not trusted or does not name the host. Polling takes over. */
  EVENTS_TLS: 'SCANGW_E_EVENTS_TLS',
  /** Status events: SASL SCRAM-SHA-512 refused the client id and secret. Polling takes over. */
  EVENTS_AUTH: 'SCANGW_E_EVENTS_AUTH',
  /** Status events: the status topic does not exist, or the client may not read or describe it. Polling takes over. */
  EVENTS_TOPIC: 'SCANGW_E_EVENTS_TOPIC',
  /** The SFTP server could not be reached, or the connection broke during a transfer. Retryable. */
  SFTP_NETWORK: 'SCANGW_E_SFTP_NETWORK',
  /** The SFTP server's host key is not the configured `upstream.sftp.hostKey`: nothing was sent. Retried, never trusted. */
  SFTP_HOST_KEY: 'SCANGW_E_SFTP_HOST_KEY',
  /** The SFTP server refused the gateway's user name, key or password. Retried (credentials get fixed). */
  SFTP_AUTH: 'SCANGW_E_SFTP_AUTH',
  /** The SFTP server refused to write, rename or list in the remote folder (permission denied): the batch is held. */
  SFTP_PERMISSION: 'SCANGW_E_SFTP_PERMISSION',
  /** The SFTP server's disk or quota is full; the partial file is removed. Retryable. */
  SFTP_DISK_FULL: 'SCANGW_E_SFTP_DISK_FULL',
  /** The remote file of a batch is there with other content (size) than the batch: held, never overwritten. */
  SFTP_CONFLICT: 'SCANGW_E_SFTP_CONFLICT',
  /** Any other SFTP failure (an unexpected status, a size that did not match after writing). Retryable. */
  SFTP: 'SCANGW_E_SFTP',
  /** An invariant that cannot fail did (a bug, or a broken installation). */
  INTERNAL: 'SCANGW_E_INTERNAL',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/**
 * Extra facts for logs and callers. Never secrets. The named keys are the ones callers read;
 * any other key is for logs only (docs/upstream.md lists the upstream ones).
 */
export interface GatewayErrorDetails {
  /** HTTP status of an upstream answer. */
  status?: number;
  /** How long the service asked to wait (`Retry-After`), ms. */
  retryAfterMs?: number;
  /** The upstream call never left (no token, connection refused, TLS): resending cannot duplicate. Any code. */
  notSent?: boolean;
  /** `'token'`: the failure was getting a token, before the call itself. */
  stage?: string;
  [key: string]: unknown;
}

export interface GatewayErrorOptions {
  cause?: unknown;
  retryable?: boolean;
  /** Extra facts for logs and callers (HTTP status, key path…). Never secrets. */
  details?: GatewayErrorDetails;
}

export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: GatewayErrorDetails;

  constructor(code: ErrorCode, message: string, options: GatewayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.details = options.details ?? {};
  }
}

export function isGatewayError(err: unknown, code?: ErrorCode): err is GatewayError {
  return err instanceof GatewayError && (code === undefined || err.code === code);
}

/**
 * A `GatewayError` known to carry one of the codes `C`. The predicates below narrow to it (not to
 * plain `GatewayError`), so that a false answer does not narrow `err` to "not a GatewayError" in
 * the caller's else branch.
 */
export type GatewayErrorOf<C extends ErrorCode> = GatewayError & { readonly code: C };

/** The codes of the SQLite buffer: any failure to open or write it, and the intake refusals. */
export const BUFFER_CODES = [
  ErrorCodes.BUFFER,
  ErrorCodes.BUFFER_UNOPENABLE,
  ErrorCodes.BUFFER_IO,
  ErrorCodes.BUFFER_DAMAGED,
  ErrorCodes.BUFFER_DISK_FULL,
  ErrorCodes.BUFFER_QUOTA,
  ErrorCodes.BUFFER_TOO_LARGE,
] as const;

/** Any failure of the SQLite buffer, whatever its kind (one of {@link BUFFER_CODES}). */
export function isBufferError(err: unknown): err is GatewayErrorOf<(typeof BUFFER_CODES)[number]> {
  return err instanceof GatewayError && (BUFFER_CODES as readonly string[]).includes(err.code);
}

/**
 * The buffer quota refused a commit (`SCANGW_E_BUFFER_QUOTA`, or `SCANGW_E_BUFFER_TOO_LARGE`: one
 * submit larger than the whole quota). Nothing of the submit was written; its source keeps it.
 */
export function isQuotaRefusal(
  err: unknown,
): err is GatewayErrorOf<typeof ErrorCodes.BUFFER_QUOTA | typeof ErrorCodes.BUFFER_TOO_LARGE> {
  return (
    isGatewayError(err, ErrorCodes.BUFFER_QUOTA) || isGatewayError(err, ErrorCodes.BUFFER_TOO_LARGE)
  );
}

/** One submit is larger than the whole buffer quota (`SCANGW_E_BUFFER_TOO_LARGE`): retrying it as is cannot succeed; split it. */
export function isTooLargeForBuffer(
  err: unknown,
): err is GatewayErrorOf<typeof ErrorCodes.BUFFER_TOO_LARGE> {
  return isGatewayError(err, ErrorCodes.BUFFER_TOO_LARGE);
}

/**
 * The disk of the buffer is full: a `SCANGW_E_BUFFER_DISK_FULL`, or SQLite's own `SQLITE_FULL`
 * (disk or `max_page_count`) on the error or up to three causes below it.
 */
export function isDiskFull(err: unknown): boolean {
  if (isGatewayError(err, ErrorCodes.BUFFER_DISK_FULL)) return true;
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    if ((e as { code?: unknown }).code === 'SQLITE_FULL') return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** The buffer cannot be opened and needs a person, not time (`SCANGW_E_BUFFER_UNOPENABLE`; `run` exits 4). */
export function isBufferUnopenable(
  err: unknown,
): err is GatewayErrorOf<typeof ErrorCodes.BUFFER_UNOPENABLE> {
  return isGatewayError(err, ErrorCodes.BUFFER_UNOPENABLE);
}

/** An upstream call that never left (`details.notSent`, whatever the code): a resend cannot be a duplicate. */
export function isNotSent(
  err: unknown,
): err is GatewayError & { readonly details: { notSent: true } } {
  return isGatewayError(err) && err.details.notSent === true;
}

/** The failure was getting a token (`details.stage: 'token'`); the call that needed it was not sent. */
export function isTokenFailure(
  err: unknown,
): err is GatewayError & { readonly details: { stage: 'token' } } {
  return isGatewayError(err) && err.details.stage === 'token';
}

/** The HTTP status of an upstream answer the error carries, or undefined. */
export function httpStatusOf(err: unknown): number | undefined {
  return isGatewayError(err) && typeof err.details.status === 'number'
    ? err.details.status
    : undefined;
}
