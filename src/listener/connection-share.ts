import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import { type Clock, systemClock } from '../clock.js';

/** What {@link shareConnections} did to keep an address within its share. */
export type ShareAction =
  /** An open connection of the address, waiting without a request in flight, was closed to make room. */
  | 'shed'
  /** The new connection was closed: every connection of the address has a request in flight. */
  | 'refused';

/** Options of {@link shareConnections}. */
export interface ConnectionShareOptions {
  /** Most connections one client address holds at once (≥ 1). */
  perClient: number;
  /** Least time a new connection has to send its request head before it may be shed, in ms (≥ 0). */
  graceMs: number;
  /** Hears of every connection closed for the share, with the peer's address. */
  onClose?: (remote: string, action: ShareAction) => void;
  now?: Clock;
}

interface Tracked {
  socket: Socket;
  /** The peer's address at accept (a destroyed socket no longer tells it). */
  remote: string;
  /** When it began to wait for a request head: accepted, or its last answer finished (epoch ms). */
  waitingSince: number;
  /** Requests whose head was read and whose answer has not finished. */
  inFlight: number;
  /** True once it had `graceMs` and the loop has polled for its data since. */
  hadTurn: boolean;
}

/**
 * A fair share of a listener's connections per client address, on top of the listener's cap
 * (`server.maxConnections`, which node enforces before any of this sees the connection).
 *
 * Why shed the waiting instead of refusing the new: a connection that holds no request costs its
 * client nothing, so idle sockets are what a client piles up to lock others out, and refusing
 * newcomers would lock out the address's own probe and ingest too (one address is often everyone:
 * a local proxy, the loopback). So when an address holds more than `perClient`, the connection of
 * that address that has waited longest without a request in flight (never sent a complete head,
 * or idle between keep-alive requests) is closed, oldest first. A new connection is never shed
 * before it had `graceMs` and the loop has polled for its data after that: a burst of real requests
 * (their heads sent, maybe not yet read while a lookup holds the loop) is counted as in flight
 * before anything of it is judged idle.
 * Only when every connection of the address has a request in flight (bounded by the request
 * timeout, the lookup queue, the stream caps) is the new connection refused.
 */
export function shareConnections(
  server: Server | TlsServer,
  options: ConnectionShareOptions,
): { connections(remote: string): number } {
  const perClient = Math.max(1, options.perClient);
  const now = options.now ?? systemClock;
  const byAddress = new Map<string, Set<Tracked>>();
  const bySocket = new WeakMap<Socket, Tracked>();
  // Over TLS a request's socket is the TLS socket wrapped around the accepted one: found by its
  // peer's address and port, which it shares with the accepted socket.
  const byPeer = new Map<string, Tracked>();
  const peerKey = (s: { remoteAddress?: string | undefined; remotePort?: number | undefined }) =>
    `${s.remoteAddress ?? ''}|${s.remotePort ?? ''}`;

  const forget = (remote: string, t: Tracked) => {
    const set = byAddress.get(remote);
    if (!set) return;
    set.delete(t);
    if (set.size === 0) byAddress.delete(remote);
  };

  /** Sheds the longest-waiting connections of `remote` until it is within its share, or none is sheddable. */
  const trim = (remote: string) => {
    const set = byAddress.get(remote);
    while (set && set.size > perClient) {
      let oldest: Tracked | undefined;
      for (const t of set) {
        if (t.inFlight > 0 || !t.hadTurn) continue;
        if (!oldest || t.waitingSince < oldest.waitingSince) oldest = t;
      }
      if (!oldest) return;
      forget(remote, oldest);
      oldest.socket.destroy();
      options.onClose?.(remote, 'shed');
    }
  };

  server.on('connection', (socket: Socket) => {
    // Closed by a listener before this one (the connection guard): nothing to share.
    if (socket.destroyed) return;
    const remote = socket.remoteAddress ?? 'unknown';
    let set = byAddress.get(remote);
    if (set && set.size >= perClient && [...set].every((t) => t.inFlight > 0)) {
      socket.destroy();
      options.onClose?.(remote, 'refused');
      return;
    }
    if (!set) byAddress.set(remote, (set = new Set()));
    const t: Tracked = { socket, remote, waitingSince: now(), inFlight: 0, hadTurn: false };
    set.add(t);
    bySocket.set(socket, t);
    const peer = peerKey(socket);
    byPeer.set(peer, t);
    socket.once('close', () => {
      forget(remote, t);
      if (byPeer.get(peer) === t) byPeer.delete(peer);
    });
    // The timer may fire before a poll (the timers phase comes first, and a long lookup may have
    // delayed the loop past it); the setImmediate after it runs once that poll has read what came.
    setTimeout(() => {
      setImmediate(() => {
        t.hadTurn = true;
        trim(remote);
      });
    }, options.graceMs).unref();
    trim(remote);
  });

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const t = bySocket.get(req.socket) ?? byPeer.get(peerKey(req.socket));
    if (!t) return;
    t.inFlight += 1;
    res.once('close', () => {
      t.inFlight = Math.max(0, t.inFlight - 1);
      t.waitingSince = now();
      if (t.inFlight === 0) trim(t.remote);
    });
  });

  return { connections: (remote) => byAddress.get(remote)?.size ?? 0 };
}
