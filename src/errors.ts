/**
 * One error class for the whole gateway, with a stable `code` that callers branch on
 * (`SCANGW_E_…`), an optional `cause`, and whether retrying the same operation can succeed.
 * Every code is listed in `docs/errors.md`.
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
  /** The SQLite buffer could not be opened or written (disk full, corrupt, locked). */
  BUFFER: 'SCANGW_E_BUFFER',
  /** An input could not be opened or failed while running. */
  INPUT: 'SCANGW_E_INPUT',
  /** A command-line usage error. */
  USAGE: 'SCANGW_E_USAGE',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export interface GatewayErrorOptions {
  cause?: unknown;
  retryable?: boolean;
  /** Extra facts for logs and callers (HTTP status, key path…). Never secrets. */
  details?: Record<string, unknown>;
}

export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: Record<string, unknown>;

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
