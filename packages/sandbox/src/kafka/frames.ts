import { ErrorCodes, GatewayError } from '@scan-gateway/service-kit/errors';
import { decodeMessage, encodeMessage, isFlexible, Reader, Writer, type Message } from './codec.js';
import { ApiKey, KafkaError, Requests, Responses, SUPPORTED, type ApiKeyName } from './messages.js';

/**
 * The broker's frames: a request frame read into its header and body, a response made into a
 * frame, and the ApiVersions answer. No I/O: the protocol tests use them on bytes alone.
 */

const byKey = new Map<number, ApiKeyName>(
  Object.entries(ApiKey).map(([name, key]) => [key, name as ApiKeyName]),
);

/** A parsed request header (request header v1/v2). */
export interface RequestHeader {
  apiKey: number;
  apiVersion: number;
  correlationId: number;
  clientId: string | null;
}

/**
 * Reads a request header and body from one frame (without its length prefix). Throws
 * `SANDBOX_KAFKA` for an unknown API, an unsupported version (`header` is on the error's
 * details) or a frame that does not hold the message.
 */
export function parseRequest(frame: Buffer): {
  header: RequestHeader;
  api: ApiKeyName;
  body: Message;
} {
  const r = new Reader(frame);
  const header: RequestHeader = {
    apiKey: r.int16(),
    apiVersion: r.int16(),
    correlationId: r.int32(),
    clientId: r.string(false),
  };
  const api = byKey.get(header.apiKey);
  const range = api === undefined ? undefined : SUPPORTED[api];
  if (
    api === undefined ||
    !range ||
    header.apiVersion < range.min ||
    header.apiVersion > range.max
  ) {
    throw new GatewayError(
      ErrorCodes.SANDBOX_KAFKA,
      `unsupported Kafka API ${header.apiKey} v${header.apiVersion}`,
      { details: { header } },
    );
  }
  const schema = Requests[api];
  if (isFlexible(schema, header.apiVersion)) r.skipTags();
  const body = decodeMessage(schema, header.apiVersion, r);
  if (r.remaining() !== 0)
    throw new GatewayError(
      ErrorCodes.SANDBOX_KAFKA,
      `${api} v${header.apiVersion} has ${r.remaining()} bytes after its body`,
    );
  return { header, api, body };
}

/** A response frame (with its length prefix). ApiVersions always has response header v0 (KIP-511). */
export function responseFrame(
  api: ApiKeyName,
  version: number,
  correlationId: number,
  body: Message,
): Buffer {
  const w = new Writer().int32(correlationId);
  if (api !== 'ApiVersions' && isFlexible(Responses[api], version)) w.uvarint(0);
  encodeMessage(Responses[api], version, body, w);
  const payload = w.finish();
  const size = Buffer.alloc(4);
  size.writeInt32BE(payload.length);
  return Buffer.concat([size, payload]);
}

/** The ApiVersions body: every API and the version range of {@link SUPPORTED}. */
export function apiVersionsBody(errorCode: number = KafkaError.NONE): Message {
  return {
    errorCode,
    apiKeys: Object.entries(SUPPORTED).map(([name, r]) => ({
      apiKey: ApiKey[name as ApiKeyName],
      minVersion: r.min,
      maxVersion: r.max,
    })),
    throttleTimeMs: 0,
  };
}
