import { ErrorCodes, isGatewayError, isNotSent, isTokenFailure } from '../errors.js';

/**
 * What the uploader (uploader.ts) makes of a failed upload besides its retry action (retry.ts): the kind
 * the status page shows, the SFTP failures that hold a batch, and an acceptance whose answer
 * cannot be read.
 */

/** What kind of failure the last upload attempt met (see `UploaderSnapshot.lastError`, uploader.ts). */
export type ErrorKind = 'token' | 'network' | 'auth' | 'answer' | 'http' | 'sftp';

/**
 * The SFTP failures that hold a batch: the server refuses to write in the folder (permission), or
 * the batch's own file name is taken by other content. Everything else is retried with backoff.
 */
export const SFTP_HOLDS: readonly string[] = [ErrorCodes.SFTP_PERMISSION, ErrorCodes.SFTP_CONFLICT];

/**
 * A 2xx answer to an upload that the client could not read (no requestId, HTML from a proxy, an
 * empty body): the service most likely has the batch, but it cannot be followed.
 */
export function isUnreadableAcceptance(err: unknown): boolean {
  if (!isGatewayError(err) || isNotSent(err)) return false;
  if (
    err.code !== ErrorCodes.UPSTREAM_RESPONSE &&
    err.code !== ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE
  )
    return false;
  const status = err.details.status;
  return typeof status !== 'number' || (status >= 200 && status < 300);
}

/** The kind of a failed upload's error, for the status page (see {@link ErrorKind}). */
export function errorKind(err: unknown): ErrorKind {
  if (!isGatewayError(err)) return 'network';
  if (err.code === ErrorCodes.SFTP_NETWORK) return 'network';
  if (err.code.startsWith('SCANGW_E_SFTP')) return 'sftp';
  if (isTokenFailure(err)) return 'token';
  if (err.code === ErrorCodes.UPSTREAM_AUTH) return 'auth';
  if (
    err.code === ErrorCodes.UPSTREAM_RESPONSE ||
    err.code === ErrorCodes.UPSTREAM_ANSWER_TOO_LARGE
  )
    return 'answer';
  if (err.code === ErrorCodes.UPSTREAM_NETWORK) return 'network';
  return 'http';
}
