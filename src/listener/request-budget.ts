import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';

/** Options of {@link budgetRequests}. */
export interface RequestBudgetOptions {
  /**
   * Requests one connection may send per second, and at once: a bucket of this many, refilled at
   * this rate. 0 = no limit.
   */
  perSecond: number;
  /** Headers of the 429 answer besides its own (the server's common headers). */
  headers?: Record<string, string>;
  /**
   * Hears of each connection closed for its budget, with the peer's address and the
   * `Retry-After` it was given, in ms.
   */
  onRefuse?: (remote: string, retryAfterMs: number) => void;
  /** A clock in ms (monotonic or epoch; a step back refills nothing); default `performance.now`. */
  now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
  /** Over its budget: answered 429 with `Connection: close`; what it sent after is dropped. */
  closing: boolean;
  /** The requests dropped behind the 429, destroyed quietly when the connection closes. */
  dropped: IncomingMessage[];
}

/** Addresses remembered as cut moments ago (each starts its next connections with one request). */
const MAX_RECENTLY_CUT = 4096;

/** `Retry-After` of the 429 that cuts a connection, in seconds. */
export const BUDGET_RETRY_AFTER_SEC = 1;

const BODY = JSON.stringify({
  statusCode: 429,
  error: 'Too Many Requests',
  message:
    'this connection sent more requests than http.limits.maxRequestsPerConnectionPerSecond allows; it is closed, connect again in a second',
});

/**
 * Bounds the requests of each connection of `server`: pipelined or one after another, a connection
 * has `perSecond` requests a second (all of them at once, at most). The first request past it is
 * answered 429 with `Retry-After: 1` and `Connection: close`, and the connection closes after it;
 * what the client pipelined behind it is dropped unanswered. `onRefuse` hears of it, so that the
 * address can be kept from reconnecting before its `Retry-After` (the connection guard's cooldown).
 * A connection opened by the same address before that `Retry-After` has passed starts with one
 * request of budget instead of `perSecond`, refilled at the same rate, so an address that is not
 * cooled down (loopback, `http.trustedClients`) and reconnects at once gets its requests at the
 * rate and not a full burst per connection.
 *
 * Why before the router: node parses a whole received chunk (up to 64 KiB, about a thousand small
 * pipelined requests) in one turn of the event loop and hands each on at once. Refused in a route
 * hook, each would still cost its framework request, hooks and answer, so one connection could hold
 * the loop that serves every other client, intake's acknowledgements included. Here a request past
 * the budget costs a lookup and nothing else. Node's own `maxRequestsPerSocket` counts a socket's
 * whole life, not a rate, so a connection could still send that many in one burst.
 *
 * Wraps the `request` listeners `server` has now (the framework's); call it before the server
 * listens and after the framework attached its handler.
 */
export function budgetRequests(server: Server | TlsServer, options: RequestBudgetOptions): void {
  const perSecond = options.perSecond;
  if (perSecond <= 0) return;
  const now = options.now ?? (() => performance.now());
  const handlers = server.listeners('request') as ((
    req: IncomingMessage,
    res: ServerResponse,
  ) => void)[];
  server.removeAllListeners('request');
  const buckets = new WeakMap<Socket, Bucket>();
  // Addresses cut less than their Retry-After ago, with when that ends (ms of `now`), oldest first.
  const recentlyCut = new Map<string, number>();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const t = now();
    let b = buckets.get(socket);
    if (!b) {
      // A connection of an address cut moments ago starts with one request, not a full bucket:
      // reconnecting at once (as a trusted address may: it is never cooled down) buys no fresh
      // burst, so a flood gets the rate and not a bucket per connection. One request is what a
      // health check's connection needs.
      const cutUntil = recentlyCut.get(socket.remoteAddress ?? '');
      const tokens = cutUntil !== undefined && cutUntil > t ? 1 : perSecond;
      b = { tokens, at: t, closing: false, dropped: [] };
      buckets.set(socket, b);
    }
    if (b.closing) {
      b.dropped.push(req);
      return;
    }
    b.tokens = Math.min(perSecond, b.tokens + (Math.max(0, t - b.at) * perSecond) / 1000);
    b.at = t;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      for (const handler of handlers) handler.call(server, req, res);
      return;
    }
    b.closing = true;
    // Read nothing more from it: what it sends next would only be parsed to be dropped.
    socket.pause();
    const dropped = b.dropped;
    // Before node's own close handling, which destroys every request and answer still waiting
    // with an error of its own (ConnResetException), capturing its stack each time: about 10 µs
    // apiece, so a cut connection that had pipelined a thousand held the loop for 10 ms, most of
    // a loopback flood's cost (a trusted address reconnects at once). Destroyed without an error
    // first, and with no stack captured for the errors node still makes in this close: those
    // errors go nowhere (no listener), and the limit is back before anything else runs.
    socket.prependOnceListener('close', () => {
      for (const r of dropped) r.destroy();
      dropped.length = 0;
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 0;
      process.nextTick(() => {
        Error.stackTraceLimit = limit;
      });
    });
    const remote = socket.remoteAddress ?? 'unknown';
    recentlyCut.delete(remote);
    recentlyCut.set(remote, t + BUDGET_RETRY_AFTER_SEC * 1000);
    if (recentlyCut.size > MAX_RECENTLY_CUT) recentlyCut.delete(recentlyCut.keys().next().value!);
    options.onRefuse?.(remote, BUDGET_RETRY_AFTER_SEC * 1000);
    res.writeHead(429, {
      ...options.headers,
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(BODY),
      'retry-after': String(BUDGET_RETRY_AFTER_SEC),
      connection: 'close',
    });
    res.end(BODY);
  });
}
