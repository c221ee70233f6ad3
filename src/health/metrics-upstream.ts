import type { Counter, Histogram } from 'prom-client';
import type { DeliveryApi } from '../delivery/types.js';
import { ErrorCodes, httpStatusOf, isGatewayError } from '../errors.js';

/**
 * The metrics recorded as calls to the upstream service happen, not read at a scrape: the time of
 * each upload and each failed call by its kind, through a wrapper of delivery's API.
 */

/** Where {@link instrumentDeliveryApi} records (the two of `GatewayMetrics`, src/health/metrics.ts). */
export interface UpstreamMetrics {
  /** Time of one upload exchange, by mode and outcome (`ok`, `error`). */
  uploadDuration: Histogram<'mode' | 'outcome'>;
  /** Failed upstream calls by operation and kind. */
  upstreamErrors: Counter<'operation' | 'kind'>;
}

/** The kind label of an upstream failure. */
export function upstreamErrorKind(err: unknown): string {
  if (!isGatewayError(err)) return 'other';
  switch (err.code) {
    case ErrorCodes.UPSTREAM_NETWORK:
      return 'network';
    case ErrorCodes.UPSTREAM_AUTH:
      return 'auth';
    case ErrorCodes.UPSTREAM_RESPONSE:
      return 'response';
    case ErrorCodes.BODY_TOO_LARGE:
      return 'too_large';
    case ErrorCodes.PRESIGNED_REFUSED:
      return 'presigned_refused';
    case ErrorCodes.UPSTREAM_HTTP: {
      const status = Number(httpStatusOf(err));
      if (status === 408) return 'timeout';
      if (status === 429) return 'rate_limited';
      if (status === 413) return 'too_large';
      return status >= 500 ? 'http_5xx' : 'http_4xx';
    }
    default:
      return 'other';
  }
}

/** Calls whose time is an upload, by mode. */
const UPLOAD_MODE: Record<string, string> = {
  uploadScans: 'direct',
  putPresigned: 'presigned',
  putPresignedStream: 'presigned',
};
const OPERATIONS = new Set([
  'uploadScans',
  'requestPresignedUpload',
  'putPresigned',
  'putPresignedStream',
  'getScanStatus',
]);

/**
 * The delivery API with metrics: the time of each upload (`uploadScans`, `putPresigned`) goes to
 * the upload histogram, and every failed call of delivery's four operations to the upstream error
 * counter. Other members pass through untouched, so the wrapper keeps working when the API grows.
 */
export function instrumentDeliveryApi<T extends DeliveryApi>(api: T, metrics: UpstreamMetrics): T {
  return new Proxy(api, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof prop !== 'string' || !OPERATIONS.has(prop) || typeof value !== 'function')
        return value;
      const mode = UPLOAD_MODE[prop];
      return async (...args: unknown[]) => {
        const end = mode ? metrics.uploadDuration.startTimer({ mode }) : undefined;
        try {
          const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(
            target,
            args,
          );
          end?.({ outcome: 'ok' });
          return result;
        } catch (err) {
          end?.({ outcome: 'error' });
          // A streamed PUT is the same operation as before it was streamed.
          metrics.upstreamErrors.inc({
            operation: prop === 'putPresignedStream' ? 'putPresigned' : prop,
            kind: upstreamErrorKind(err),
          });
          throw err;
        }
      };
    },
  });
}
