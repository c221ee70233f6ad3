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
  /**
   * Whether a peer address is trusted (loopback, `http.trustedClients`): its connection is slowed
   * past the budget, never cut. Default: none is.
   */
  isTrusted?: (remote: string) => boolean;
  /**
   * Longest time a trusted connection stays unread while requests it sent wait for its budget, in
   * ms; then it is read again even so. Below the listener's header timeout: a request head cut in
   * two by the last read would otherwise wait for its end past that timeout, and node would close
   * the connection for it. Default 5000.
   */
  maxPauseMs?: number;
  /** Hears of each trusted connection paused for its budget, with the peer's address. */
  onSlow?: (remote: string) => void;
  /** A monotonic clock in ms; default `performance.now`. */
  now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
  /** Trusted: slowed past its budget instead of cut. */
  trusted: boolean;
  /** A trusted connection's requests past its budget, oldest first, answered as it refills. */
  held: [IncomingMessage, ServerResponse][];
  /** Unread by us (held non-empty): node's own resume after a drain is undone. */
  paused: boolean;
  /**
   * Past node's `maxRequestsPerSocket` (its last allowed answer said `Connection: close`): never
   * read again, left to the keep-alive timeout if the client does not close it.
   */
  ended: boolean;
  /** When it was last paused ({@link RequestBudgetOptions.now}). */
  pausedAt: number;
  /** The next look at `held`: a budget timer, or a wait for the socket's `drain`. */
  waiting: boolean;
  /** Over its budget: answered 429 with `Connection: close`; what it sent after is dropped. */
  closing: boolean;
  /** The requests dropped behind the 429, destroyed quietly when the connection closes. */
  dropped: IncomingMessage[];
}

/**
 * Requests a trusted connection may have parsed and not yet answered: past it, it is no longer read
 * before its queue drains (each held request is about 2 KB of memory). One read (64 KiB) of small
 * pipelined requests is about a thousand, so the bound is reached only by a client that pipelines
 * far past its budget for several `maxPauseMs` in a row.
 */
export const MAX_HELD_REQUESTS = 4096;

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
 * has `perSecond` requests a second (all of them at once, at most).
 *
 * - **Untrusted address: cut.** The first request past the budget is answered 429 with
 *   `Retry-After: 1` and `Connection: close`, and the connection closes after it; what the client
 *   pipelined behind it is dropped unanswered. `onRefuse` hears of it, so that the address can be
 *   kept from reconnecting before its `Retry-After` (the connection guard's cooldown).
 * - **Trusted address (`isTrusted`): slowed.** It never cools down (keepalived's check shares the
 *   loopback), so a cut one would reconnect at once, and each cut costs node's close handling of
 *   every request still queued. Instead the socket is paused (not read: TCP flow control holds the
 *   rest of its pipeline in the client's and the kernel's buffers) and its parsed requests past
 *   the budget wait, in order, to be handed on as the budget refills; it is read again once they
 *   are all handed on. No request is refused. A client that stops reading its answers gets no more
 *   of them once the socket's write buffer is full (the next waits for `drain`), so nothing is
 *   written or read and the listener's idle timeout closes it; one that reads them is written to
 *   at least once per `1 / perSecond` s, which keeps that timeout away. Held requests are bounded:
 *   one read's worth, plus one read per `maxPauseMs` while fewer than {@link MAX_HELD_REQUESTS}
 *   wait (past it, it is read again only once they are handed on).
 * - **Past node's `maxRequestsPerSocket`** (any address): node answers 503 itself, outside the
 *   budget, and keeps the connection open; it is read no more, so a client that pipelines on past
 *   the `Connection: close` of its last allowed answer is not answered as fast as it writes.
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
  const maxPauseMs = options.maxPauseMs ?? 5000;
  const handlers = server.listeners('request') as ((
    req: IncomingMessage,
    res: ServerResponse,
  ) => void)[];
  server.removeAllListeners('request');
  const buckets = new WeakMap<Socket, Bucket>();
  const serve = (req: IncomingMessage, res: ServerResponse) => {
    for (const handler of handlers) handler.call(server, req, res);
  };
  const refill = (b: Bucket, t: number) => {
    b.tokens = Math.min(perSecond, b.tokens + ((t - b.at) * perSecond) / 1000);
    b.at = t;
  };
  const pause = (socket: Socket, b: Bucket) => {
    if (b.paused) return;
    b.paused = true;
    b.pausedAt = now();
    socket.pause();
  };
  const resume = (socket: Socket, b: Bucket) => {
    if (!b.paused || b.ended) return;
    b.paused = false;
    socket.resume();
  };
  /** Hands on the held requests the budget allows now, and looks again when it allows the next. */
  const pump = (socket: Socket, b: Bucket) => {
    b.waiting = false;
    if (socket.destroyed) return;
    const t = now();
    refill(b, t);
    let next = b.held[0];
    while (next && b.tokens >= 1) {
      // A client that does not read its answers gets no more: written nothing and read nothing,
      // its connection is left to the idle timeout.
      if (socket.writableNeedDrain) {
        b.waiting = true;
        socket.once('drain', () => pump(socket, b));
        return;
      }
      b.tokens -= 1;
      b.held.shift();
      serve(...next);
      next = b.held[0];
    }
    if (!next) {
      resume(socket, b);
      return;
    }
    if (b.paused && t - b.pausedAt >= maxPauseMs && b.held.length < MAX_HELD_REQUESTS)
      resume(socket, b);
    b.waiting = true;
    const timer = setTimeout(
      () => pump(socket, b),
      Math.max(1, Math.ceil(((1 - b.tokens) * 1000) / perSecond)),
    );
    timer.unref();
  };
  // Node answers every request past `maxRequestsPerSocket` 503 itself, without a 'request' event
  // and so outside the budget, and keeps the connection open: a client that pipelines on past the
  // `Connection: close` of its last allowed answer would be read and answered as fast as it
  // writes. It is read no more; what it was owed is still answered, in order.
  server.on('dropRequest', (_req: IncomingMessage, socket: Socket) => {
    const b = buckets.get(socket);
    if (!b || b.ended || b.closing) return;
    b.ended = true;
    b.paused = true;
    socket.pause();
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const t = now();
    let b = buckets.get(socket);
    if (!b) {
      const trusted = options.isTrusted?.(socket.remoteAddress ?? 'unknown') ?? false;
      b = {
        tokens: perSecond,
        at: t,
        trusted,
        held: [],
        paused: false,
        pausedAt: t,
        waiting: false,
        ended: false,
        closing: false,
        dropped: [],
      };
      buckets.set(socket, b);
      const bucket = b;
      // Node resumes a socket once its answers drain, and when a request is read or dumped; one
      // paused here stays unread whatever node did.
      socket.on('resume', () => {
        if (bucket.paused || bucket.ended) socket.pause();
      });
      if (trusted) {
        // As for a cut connection: destroyed without an error, a held request costs little.
        socket.prependOnceListener('close', () => {
          for (const [r] of bucket.held.splice(0)) r.destroy();
        });
      }
    }
    if (b.closing) {
      b.dropped.push(req);
      return;
    }
    if (b.held.length > 0) {
      // Behind others that wait: in order, and it waits too.
      b.held.push([req, res]);
      pause(socket, b);
      return;
    }
    refill(b, t);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      serve(req, res);
      return;
    }
    if (b.trusted) {
      b.held.push([req, res]);
      pause(socket, b);
      options.onSlow?.(socket.remoteAddress ?? 'unknown');
      if (!b.waiting) pump(socket, b);
      return;
    }
    b.closing = true;
    // Read nothing more from it: what it sends next would only be parsed to be dropped.
    socket.pause();
    const dropped = b.dropped;
    // Before node's own close handling, which destroys every request still waiting with an error
    // of its own and formats its stack: about 10 µs each, so a cut connection that had pipelined
    // a thousand held the loop for 10 ms. Destroyed without an error first, each costs little.
    socket.prependOnceListener('close', () => {
      for (const r of dropped) r.destroy();
      dropped.length = 0;
    });
    options.onRefuse?.(socket.remoteAddress ?? 'unknown', BUDGET_RETRY_AFTER_SEC * 1000);
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
