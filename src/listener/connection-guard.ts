import type { Server } from 'node:http';
import { BlockList, isIP, type Socket } from 'node:net';
import type { Server as TlsServer, TLSSocket } from 'node:tls';
import { type Clock, systemClock } from '../clock.js';
import type { HttpLimitsConfig } from '../config/schema.js';
import { RefusalLog, type WarnLogger } from '@scan-gateway/service-kit/refusal-log';

/** Why {@link guardConnections} closed a connection. */
export type GuardAction =
  /** A new connection from an untrusted address: untrusted ones hold all they may (cap − reserve). */
  | 'cap'
  /** An unfinished TLS handshake, the oldest of the address holding the most, made room for a new one. */
  | 'handshake_budget'
  /** A TLS handshake not finished within the handshake deadline. */
  | 'handshake_timeout'
  /** A new connection from an untrusted address one of whose connections was just cut ({@link ConnectionGuard.coolDown}). */
  | 'cooldown';

/** Options of {@link guardConnections}. */
export interface ConnectionGuardOptions {
  /** The listener's cap (`http.limits.maxConnections`, also node's `server.maxConnections`). */
  maxConnections: number;
  /**
   * Connections only trusted addresses may take (`http.limits.trustedReserve`); at most a quarter
   * of `maxConnections` is reserved, so a small cap still serves others.
   */
  trustedReserve: number;
  /** Whether a peer address is trusted ({@link trustedClients}). */
  isTrusted: (remote: string) => boolean;
  /** For a TLS listener: the handshake bounds of untrusted addresses; absent for plain HTTP. */
  handshakes?: {
    /** Unfinished handshakes of untrusted addresses at once (≥ 1). */
    budget: number;
    /** Longest time from accept to a finished handshake, in ms. */
    timeoutMs: number;
  };
  /** Hears of every connection closed here, with the peer's address. */
  onClose?: (remote: string, action: GuardAction) => void;
  now?: Clock;
}

/** What {@link guardConnections} returns. */
export interface ConnectionGuard {
  counts(): GuardCounts;
  /**
   * Closes the new connections of `remote` at accept, before any TLS handshake, for `ms` (the
   * `Retry-After` its cut connection was told), unless it is trusted. For a connection cut for
   * its request budget: reopened at once, each would cost a handshake and the parse of another
   * pipelined burst, the work the budget is there to bound.
   */
  coolDown(remote: string, ms: number): void;
}

/** Addresses cooling down at once, at most: past it the oldest is forgotten (memory stays bounded). */
const MAX_COOLING = 4096;

/** What {@link guardConnections} holds now, for tests and the bench. */
export interface GuardCounts {
  /** Open connections of untrusted addresses. */
  untrusted: number;
  /** Unfinished TLS handshakes (every address: trusted ones count here, not against the budget). */
  handshaking: number;
}

interface Pending {
  socket: Socket;
  /** The peer's address and port (see `byPeer`). */
  key: string;
  remote: string;
  since: number;
  trusted: boolean;
  timer: NodeJS.Timeout | undefined;
  /** Forgets the connection: its untrusted slot and its unfinished handshake (once). */
  release: () => void;
}

/** The address as the listener's address lists spell it (`::ffff:10.0.0.5` is `10.0.0.5`). */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * The addresses that keep the reserve of {@link guardConnections}: 127.0.0.1 and ::1 (the
 * gateway's own probes and a local proxy), and the entries of `http.trustedClients` (an address,
 * or a network as `address/bits`). The rest of 127.0.0.0/8 is not trusted unless listed: it is
 * how several "remote" addresses are made on one machine (the tests), and nothing of the gateway's
 * own uses it.
 */
export function trustedClients(entries: readonly string[]): (remote: string) => boolean {
  const list = new BlockList();
  list.addAddress('127.0.0.1', 'ipv4');
  list.addAddress('::1', 'ipv6');
  for (const entry of entries) {
    const [address = '', bits] = entry.split('/');
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(bits), family);
  }
  return (remote) => {
    const address = plainAddress(remote);
    const family = isIP(address);
    return family !== 0 && list.check(address, family === 6 ? 'ipv6' : 'ipv4');
  };
}

/**
 * Keeps a listener's connections from being filled by clients nobody vouched for, on top of the
 * cap node enforces (`server.maxConnections`) and the per-address share (connection-share.ts):
 *
 * - **Reserve.** Untrusted addresses hold at most `maxConnections − reserve` connections; a new
 *   one past that is closed at once. Loopback and `http.trustedClients` may take the rest, so the
 *   gateway's probes and the operator's page are answered whatever others do.
 * - **Handshake budget (TLS).** Unfinished handshakes of untrusted addresses count against a small
 *   budget. When a new one finds it full, the oldest unfinished handshake of the address holding
 *   the most is closed. Refusing the new one instead would let an attacker keep the budget full by
 *   reopening and lock every other client out; closing the heaviest address's oldest makes the
 *   attacker pay for its own sockets, while a real client (one handshake, finished in
 *   milliseconds) is neither the heaviest nor the oldest.
 * - **Handshake deadline (TLS).** A handshake not finished `timeoutMs` after accept is closed here,
 *   with the address captured at accept (node's own handshake timeout fires on a socket that may
 *   no longer tell its peer).
 * - **Cooldown.** An untrusted address told to come back later (a connection cut for its request
 *   budget, {@link ConnectionGuard.coolDown}) has its new connections closed at accept until then:
 *   a close costs a few µs, a TLS handshake and a parsed burst of pipelined requests far more.
 *   Trusted addresses never cool down: the gateway's own probes may share the loopback with the
 *   client that was cut.
 *
 * Register before {@link shareConnections}: a connection closed here is never tracked there.
 */
export function guardConnections(
  server: Server | TlsServer,
  options: ConnectionGuardOptions,
): ConnectionGuard {
  const now = options.now ?? systemClock;
  // Untrusted addresses cooling down, by address, until when (ms of `now`): set in time order
  // with one duration, so the first entries are the first to expire.
  const cooling = new Map<string, number>();
  const reserve = Math.max(
    0,
    Math.min(options.trustedReserve, Math.floor(options.maxConnections / 4)),
  );
  const untrustedCap = options.maxConnections - reserve;
  const handshakes = options.handshakes;
  let untrusted = 0;
  // Unfinished handshakes of untrusted addresses, by address, oldest first (insertion order).
  const pendingByAddress = new Map<string, Set<Pending>>();
  let pendingUntrusted = 0;
  // Every unfinished handshake, by the peer's address and port, which the TLS socket shares with
  // the accepted one: how a finished handshake finds its entry.
  const byPeer = new Map<string, Pending>();
  const peerKey = (address: string | undefined, port: number | undefined) =>
    `${address ?? ''}|${port ?? ''}`;

  const settle = (p: Pending) => {
    if (byPeer.get(p.key) !== p) return;
    byPeer.delete(p.key);
    if (p.timer) clearTimeout(p.timer);
    if (p.trusted) return;
    const set = pendingByAddress.get(p.remote);
    if (set?.delete(p)) pendingUntrusted -= 1;
    if (set?.size === 0) pendingByAddress.delete(p.remote);
  };

  /**
   * Closes the oldest unfinished handshake of the address holding the most (older wins a tie).
   * @returns false when there was none.
   */
  const evictOne = (): boolean => {
    let victim: Pending | undefined;
    let most = 0;
    for (const set of pendingByAddress.values()) {
      const oldest = set.values().next().value;
      if (!oldest) continue;
      if (set.size > most || (set.size === most && victim && oldest.since < victim.since)) {
        most = set.size;
        victim = oldest;
      }
    }
    if (!victim) return false;
    victim.release();
    victim.socket.destroy();
    options.onClose?.(victim.remote, 'handshake_budget');
    return true;
  };

  server.on('connection', (socket: Socket) => {
    const remote = plainAddress(socket.remoteAddress ?? 'unknown');
    const trusted = options.isTrusted(remote);
    if (!trusted) {
      const until = cooling.get(remote);
      if (until !== undefined) {
        if (now() < until) {
          socket.destroy();
          options.onClose?.(remote, 'cooldown');
          return;
        }
        cooling.delete(remote);
      }
      if (untrusted >= untrustedCap) {
        socket.destroy();
        options.onClose?.(remote, 'cap');
        return;
      }
      untrusted += 1;
    }
    const key = peerKey(socket.remoteAddress, socket.remotePort);
    let pending: Pending | undefined;
    // Released when closed here, not at its 'close': a burst of connections accepted in one turn
    // of the loop evicts as many, whose 'close' comes only in the next turn; counted till then,
    // they would fill the untrusted share with sockets already gone.
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      if (!trusted) untrusted -= 1;
      if (pending) settle(pending);
    };
    if (handshakes) {
      const budget = Math.max(1, handshakes.budget);
      if (!trusted) while (pendingUntrusted >= budget && evictOne()) continue;
      const p: Pending = { socket, key, remote, since: now(), trusted, timer: undefined, release };
      p.timer = setTimeout(() => {
        if (byPeer.get(key) !== p) return;
        release();
        socket.destroy();
        options.onClose?.(remote, 'handshake_timeout');
      }, handshakes.timeoutMs);
      p.timer.unref();
      byPeer.set(key, p);
      if (!trusted) {
        let set = pendingByAddress.get(remote);
        if (!set) pendingByAddress.set(remote, (set = new Set()));
        set.add(p);
        pendingUntrusted += 1;
      }
      pending = p;
    }
    socket.once('close', release);
  });

  if (handshakes)
    server.on('secureConnection', (tls: TLSSocket) => {
      const key = peerKey(tls.remoteAddress, tls.remotePort);
      const p = byPeer.get(key);
      if (p) settle(p);
    });

  return {
    counts: () => ({ untrusted, handshaking: byPeer.size }),
    coolDown: (address, ms) => {
      const remote = plainAddress(address);
      if (options.isTrusted(remote)) return;
      const t = now();
      for (const [key, until] of cooling) {
        if (until > t && cooling.size < MAX_COOLING) break;
        cooling.delete(key);
      }
      cooling.delete(remote);
      cooling.set(remote, t + ms);
    },
  };
}

/** The `reason` label of `scan_gateway_http_refused_total` for a connection the guard closed. */
export const GUARD_REASONS = {
  cap: 'connection_cap',
  handshake_budget: 'tls_handshake_budget',
  handshake_timeout: 'tls_handshake_timeout',
  cooldown: 'connection_cooldown',
} as const satisfies Record<GuardAction, string>;

/** The message of a guard log line, by what the guard did. */
const GUARD_MESSAGES = {
  cap: 'connection refused: untrusted addresses hold every connection but the trusted reserve',
  handshake_budget:
    'TLS handshake closed: the unfinished handshakes are at maxPendingHandshakes; the oldest of the address holding the most made room',
  handshake_timeout: 'TLS handshake timed out: not finished within tlsHandshakeTimeoutMs',
  cooldown:
    'connection refused: a connection of this address was just cut for its request budget; it may connect again after Retry-After',
} as const satisfies Record<GuardAction, string>;

/**
 * {@link guardConnections} on the health/ingest server with `http.limits` and
 * `http.trustedClients`: every connection it closes is counted (`count`, by the reasons of
 * {@link GUARD_REASONS}) and logged with the peer's address, one rate-limited line per action.
 * @returns `flush`, for the server's close: writes the lines still held back; and
 * {@link ConnectionGuard.coolDown}.
 */
export function guardListener(
  server: Server | TlsServer,
  options: {
    limits: HttpLimitsConfig;
    /** Whether the listener speaks TLS (the handshake budget and deadline apply). */
    tls: boolean;
    trustedClients: readonly string[];
    logger: WarnLogger;
    /** Least time between two log lines of one action, in ms. */
    intervalMs: number;
    count: (reason: string) => void;
    now?: Clock;
  },
): { flush(): void; coolDown(remote: string, ms: number): void } {
  const { limits, logger, intervalMs } = options;
  const logs = {
    cap: new RefusalLog(logger, GUARD_MESSAGES.cap, intervalMs),
    handshake_budget: new RefusalLog(logger, GUARD_MESSAGES.handshake_budget, intervalMs),
    handshake_timeout: new RefusalLog(logger, GUARD_MESSAGES.handshake_timeout, intervalMs),
    cooldown: new RefusalLog(logger, GUARD_MESSAGES.cooldown, intervalMs),
  };
  const guard = guardConnections(server, {
    maxConnections: limits.maxConnections,
    trustedReserve: limits.trustedReserve,
    isTrusted: trustedClients(options.trustedClients),
    ...(options.now ? { now: options.now } : {}),
    ...(options.tls
      ? {
          handshakes: {
            budget: limits.maxPendingHandshakes,
            timeoutMs: limits.tlsHandshakeTimeoutMs,
          },
        }
      : {}),
    onClose: (remote, action) => {
      options.count(GUARD_REASONS[action]);
      logs[action].note({ remote });
    },
  });
  return {
    flush: () => {
      for (const l of Object.values(logs)) l.flush();
    },
    coolDown: guard.coolDown,
  };
}
