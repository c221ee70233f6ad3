import type { Dispatcher } from 'undici';

/**
 * Reading the service's answer bodies (split from client.ts): within a byte cap, as JSON that keeps
 * long numeric requestIds exact (contract §2.8), or dropped unread.
 */

/** What {@link safeJson} answers for a text that is not JSON. */
export const NOT_JSON = Symbol('not JSON');

/**
 * Drops an answer body unread: undici closes the connection. The body then reports an abort, which
 * nobody waits for (without a listener it would be an uncaught error).
 */
export function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

/**
 * Reads an answer body up to `maxBytes`. A `Content-Length` over the cap, or more bytes than it,
 * stops the read at once and destroys the body (undici then closes the connection), so memory
 * stays at the cap whatever the server sends.
 */
export async function readCapped(
  body: Dispatcher.ResponseData['body'],
  maxBytes: number,
  contentLength: string | string[] | undefined,
): Promise<{ text: string; truncated: boolean }> {
  const declared = Number(Array.isArray(contentLength) ? contentLength[0] : contentLength);
  if (Number.isFinite(declared) && declared > maxBytes) {
    discard(body);
    return { text: '', truncated: true };
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    const room = maxBytes - total;
    if (chunk.length > room) {
      if (room > 0) chunks.push(chunk.subarray(0, room));
      discard(body);
      return { text: Buffer.concat(chunks).toString('utf8'), truncated: true };
    }
    chunks.push(chunk);
    total += chunk.length;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), truncated: false };
}

/**
 * A `requestId` written as a JSON number of 16 digits or more (§2.8 shows a number; a 64-bit id
 * does not fit a double) is read as the string of its digits, before JSON.parse rounds it to
 * another id. Inside a JSON string a quote is escaped, so the pattern cannot match string content.
 */
const LONG_NUMERIC_REQUEST_ID = /("requestId"\s*:\s*)(\d{16,})(?=\s*[,}\]])/g;

/** Parses an answer body; {@link NOT_JSON} when it is not JSON. Long numeric requestIds stay exact. */
export function safeJson(text: string): unknown {
  try {
    return JSON.parse(
      text.includes('"requestId"') ? text.replace(LONG_NUMERIC_REQUEST_ID, '$1"$2"') : text,
    ) as unknown;
  } catch {
    return NOT_JSON;
  }
}
