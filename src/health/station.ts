import type { ServerResponse } from 'node:http';
import type { StationRead } from '../queries/station.js';
import { stationKeys } from '../queries/station.js';
import { scrubValue, type Logger } from '../log.js';
import { currentShift, readView, stationDelivery, type Shift } from './station-views.js';
import { STATION_LAST, type StationContainer, type StationSnapshot } from './station-page.js';
import type { GatewayStatus } from './status.js';
import type { Clock } from '../clock.js';

export { currentShift, readView, stationDelivery, type Shift } from './station-views.js';

/**
 * The live side of the station screen: one poller for all open screens. While at least
 * one event stream is open, it asks the buffer every {@link STATION_POLL_MS} ms for the reads
 * committed since the last one it saw (a range of the rowid: cost grows with the new reads, not
 * the buffer) and sends each to the screens of its station; every second it checks whether
 * delivery is stalled and tells the screens when that changes; at a shift change it sends each
 * screen a fresh snapshot. Bounded: at most `maxStreams` streams and `maxStreamsPerClient` of one
 * client address (a stream past either is refused with 503), a heartbeat comment keeps idle proxies
 * and the server's idle timeout from cutting a quiet stream, and {@link StationHub.close} ends every
 * stream (the server calls it before it closes).
 *
 * A client that does not take what is sent would otherwise hold its slot for ever: heartbeats go
 * into the socket's buffers and keep it alive. Once a write is refused (`write()` false: the
 * kernel's and node's buffers are full), the stream gets nothing more but is not cut at once (a
 * screen may be slow for a moment); it is closed when no 'drain' came for `stallMs`, freeing its
 * slot. A stream that drains in time gets a fresh snapshot in place of the reads it missed.
 *
 * What a screen is shown of the shift, delivery and each read is worked out in station-views.ts
 * (pure functions, re-exported here); this file keeps the streams, the timers and the polls.
 */

/** Most station event streams open at once, by default. A screen holds one; 32 stations is a large line. */
export const STATION_MAX_STREAMS = 32;
/** How often the buffer is asked for new reads while a screen is open, in ms (a scan shows within this). */
export const STATION_POLL_MS = 250;
/** Heartbeat of an event stream, in ms, at most (the server's idle timeout halves it when shorter). */
export const STATION_HEARTBEAT_MS = 15_000;
/** How often each screen gets a fresh snapshot, in ms: the states of the listed scans (sending → delivered) move on without a read. */
export const STATION_REFRESH_MS = 30_000;
/** How long a stream's client may leave its send buffer full before the stream is closed, in ms, by default. */
export const STATION_STALL_MS = 30_000;
/** Most reads taken from the buffer per poll; more wait for the next poll. */
const POLL_BATCH = 500;

/** What the hub reads: the buffer's station queries, the configuration now, the status. */
export interface StationSource {
  /** The configured DCPs and, for each, the inputs whose `dcp` it is (and their `name`s, when set). */
  dcps(): { key: string; kind: string; inputs: string[]; inputNames?: Record<string, string> }[];
  site(): { id: string; timezone: string; shifts: readonly Shift[] };
  recent(keys: readonly string[], limit: number): StationRead[];
  counts(keys: readonly string[], sinceIso: string): Record<string, number>;
  readsAfter(afterId: number, limit: number): (StationRead & { inputLevel: boolean })[];
  lastReadId(): number;
  /** The open containers of every station (src/mapping/mapper.ts `openContainers`); none when absent. */
  openContainers?(): readonly StationContainerSource[];
  status(): GatewayStatus;
}

/** An open container as the mapping lists it: per input (station = input id) or per DCP. */
export interface StationContainerSource {
  container: string;
  per: 'input' | 'dcp';
  station: string;
  parent: string;
  reads: number;
  expected?: number | undefined;
}

/** One event of an event stream, as sent. */
function frame(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

interface Stream {
  dcpKey: string;
  res: ServerResponse;
  shiftStart: string;
  /** The client's address, for the per-client cap. */
  remote: string;
  /** Since when a write waits for 'drain' (epoch ms); undefined while the client keeps up. */
  blockedSince?: number;
  /** An event was left out while blocked: a snapshot follows the 'drain'. */
  missed?: boolean;
}

/** Options of a {@link StationHub}; every field has a default. */
export interface StationHubOptions {
  /** Most streams open at once; default {@link STATION_MAX_STREAMS}. */
  maxStreams?: number;
  /** Most streams of one client address; default `maxStreams`. */
  maxStreamsPerClient?: number;
  /** See {@link STATION_STALL_MS}. */
  stallMs?: number;
  /** Hears of a stream closed because its client did not take what was sent. */
  onStalled?: (remote: string, blockedMs: number) => void;
  pollMs?: number;
  heartbeatMs?: number;
  now?: Clock;
  scrub?: (text: string) => string;
}

export class StationHub {
  private readonly streams = new Set<Stream>();
  private poller: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private cursor = 0;
  private polls = 0;
  private lastDelivery = '';
  private closed = false;
  private readonly maxStreams: number;
  private readonly maxPerClient: number;
  private readonly stallMs: number;
  private readonly onStalled: ((remote: string, blockedMs: number) => void) | undefined;
  private readonly pollMs: number;
  private readonly heartbeatMs: number;
  private readonly now: Clock;
  private readonly scrub: (text: string) => string;

  constructor(
    private readonly source: StationSource,
    private readonly logger: Logger,
    options: StationHubOptions = {},
  ) {
    this.maxStreams = options.maxStreams ?? STATION_MAX_STREAMS;
    this.maxPerClient = options.maxStreamsPerClient ?? this.maxStreams;
    this.stallMs = options.stallMs ?? STATION_STALL_MS;
    this.onStalled = options.onStalled;
    this.pollMs = options.pollMs ?? STATION_POLL_MS;
    this.heartbeatMs = options.heartbeatMs ?? STATION_HEARTBEAT_MS;
    this.now = options.now ?? Date.now;
    this.scrub = options.scrub ?? ((t) => t);
  }

  /** Streams open now. */
  get size(): number {
    return this.streams.size;
  }

  /** Whether a new stream would be refused (the cap is reached, or the hub closed). */
  get full(): boolean {
    return this.closed || this.streams.size >= this.maxStreams;
  }

  /** Whether a new stream from `remote` would be refused because that address holds its share. */
  fullFor(remote: string): boolean {
    let n = 0;
    for (const s of this.streams) if (s.remote === remote) n++;
    return n >= this.maxPerClient;
  }

  /** The configured DCP `dcpKey` with its inputs, or undefined. */
  station(dcpKey: string): ReturnType<StationSource['dcps']>[number] | undefined {
    return this.source.dcps().find((d) => d.key === dcpKey);
  }

  /** Everything the screen of `dcpKey` shows now; undefined for a DCP that is not configured. */
  snapshot(dcpKey: string): StationSnapshot | undefined {
    const dcp = this.station(dcpKey);
    if (!dcp) return undefined;
    const site = this.source.site();
    const nowMs = this.now();
    const shift = currentShift(site.shifts, nowMs, site.timezone);
    const keys = stationKeys(dcp.key, dcp.inputs);
    const counts = this.source.counts(keys, shift.startsAt);
    const snapshot: StationSnapshot = {
      site: site.id,
      timezone: site.timezone,
      dcp: { key: dcp.key, kind: dcp.kind },
      shift,
      counts: {
        taken: counts.scan ?? 0,
        refused: counts.rejected ?? 0,
        duplicate: counts.duplicate ?? 0,
        noRead: counts.noRead ?? 0,
      },
      last: this.source.recent(keys, STATION_LAST).map((r) => readView(r, dcp.inputNames)),
      containers: this.containersOf(dcp),
      delivery: stationDelivery(this.source.status()),
      generatedAt: new Date(nowMs).toISOString(),
    };
    return this.scrubbed(snapshot);
  }

  /** The containers open at a station: those kept per its DCP, and per each of its inputs. */
  private containersOf(dcp: { key: string; inputs: string[] }): StationContainer[] {
    return (this.source.openContainers?.() ?? [])
      .filter((c) => (c.per === 'dcp' ? c.station === dcp.key : dcp.inputs.includes(c.station)))
      .map((c) => ({
        name: c.container,
        parent: c.parent,
        members: c.reads,
        ...(c.expected !== undefined ? { expected: c.expected } : {}),
        ...(c.per === 'input' ? { inputId: c.station } : {}),
      }));
  }

  /**
   * Makes `res` (a response the route has taken over) an event stream of `dcpKey` for the client
   * at `remote`. Answers false, having written nothing, when `maxStreams` are open, `remote` holds
   * its share, or the hub is closed: the route answers 503.
   */
  open(dcpKey: string, res: ServerResponse, remote = 'unknown'): boolean {
    if (this.full || this.fullFor(remote)) return false;
    // The cursor before the snapshot: a read committed in between comes twice (the screen drops
    // the repeat by its id) rather than never.
    if (this.streams.size === 0) this.cursor = this.source.lastReadId();
    const snapshot = this.snapshot(dcpKey);
    if (!snapshot) return false;
    const stream: Stream = { dcpKey, res, shiftStart: snapshot.shift.startsAt, remote };
    this.streams.add(stream);
    res.on('close', () => {
      this.streams.delete(stream);
      if (this.streams.size === 0) this.stopTimers();
    });
    // The client waits this long before it connects again after a cut.
    this.write(stream, `retry: 2000\n\n`, false);
    this.send(stream, 'snapshot', snapshot);
    this.startTimers();
    return true;
  }

  /** Ends every stream and stops polling (the server calls it before it closes). */
  close(): void {
    this.closed = true;
    this.stopTimers();
    for (const s of this.streams) s.res.end();
    this.streams.clear();
  }

  private startTimers(): void {
    if (this.poller) return;
    this.lastDelivery = '';
    this.poller = setInterval(() => this.poll(), this.pollMs);
    this.heartbeat = setInterval(() => {
      for (const s of this.streams) this.write(s, `: keep-alive\n\n`, false);
    }, this.heartbeatMs);
  }

  private stopTimers(): void {
    clearInterval(this.poller);
    clearInterval(this.heartbeat);
    this.poller = undefined;
    this.heartbeat = undefined;
  }

  private poll(): void {
    this.closeStalled();
    try {
      this.pollReads();
      const n = this.polls++;
      if (n % Math.max(1, Math.round(1000 / this.pollMs)) === 0) this.pollDelivery();
      if (n > 0 && n % Math.max(1, Math.round(STATION_REFRESH_MS / this.pollMs)) === 0)
        this.refreshAll();
    } catch (err) {
      // The buffer closing under a stop, or a busy moment: the next poll tries again.
      this.logger.debug(
        { component: 'station', err: (err as Error).message },
        'station poll failed',
      );
    }
  }

  private pollReads(): void {
    const rows = this.source.readsAfter(this.cursor, POLL_BATCH);
    if (rows.length === 0) return;
    this.cursor = rows[rows.length - 1]!.id;
    const dcps = this.source.dcps();
    const dcpOfInput = new Map<string, string>();
    const names: Record<string, string> = {};
    for (const d of dcps) {
      for (const i of d.inputs) dcpOfInput.set(i, d.key);
      Object.assign(names, d.inputNames);
    }
    const site = this.source.site();
    const shift = currentShift(site.shifts, this.now(), site.timezone);
    for (const s of this.streams) {
      // A new shift: the screen starts its counts again from a fresh snapshot.
      if (s.shiftStart !== shift.startsAt) {
        const snap = this.snapshot(s.dcpKey);
        if (snap) this.send(s, 'snapshot', snap);
        s.shiftStart = shift.startsAt;
      }
    }
    const touched = new Set<string>();
    for (const r of rows) {
      if (r.inputLevel) continue;
      const dcp = r.station.startsWith('@') ? dcpOfInput.get(r.station.slice(1)) : r.station;
      if (dcp === undefined) continue;
      touched.add(dcp);
      // Made once for every screen of the station (a busy line, many screens).
      const text = frame('read', this.scrubbed(readView(r, names)));
      for (const s of this.streams) if (s.dcpKey === dcp) this.write(s, text, true);
    }
    // After the reads of a station, its containers as they are now ("4 of 12").
    for (const key of touched) {
      const dcp = this.station(key);
      if (!dcp) continue;
      const text = frame('containers', this.scrubbed(this.containersOf(dcp)));
      for (const s of this.streams) if (s.dcpKey === key) this.write(s, text, true);
    }
  }

  /** A fresh snapshot to every screen (one query set per station, shared by its screens). */
  private refreshAll(): void {
    const snaps = new Map<string, StationSnapshot | undefined>();
    for (const s of this.streams) {
      if (!snaps.has(s.dcpKey)) snaps.set(s.dcpKey, this.snapshot(s.dcpKey));
      const snap = snaps.get(s.dcpKey);
      if (!snap) continue;
      this.send(s, 'snapshot', snap);
      s.shiftStart = snap.shift.startsAt;
    }
  }

  private pollDelivery(): void {
    const d = stationDelivery(this.source.status());
    const key = JSON.stringify(d);
    if (key === this.lastDelivery) return;
    this.lastDelivery = key;
    const text = frame('delivery', d);
    for (const s of this.streams) this.write(s, text, true);
  }

  private send(s: Stream, event: string, data: unknown): void {
    if (s.blockedSince !== undefined) s.missed = true;
    else this.write(s, frame(event, data), true);
  }

  /**
   * Writes `text` unless the stream waits for 'drain' (then an event is noted as missed: the
   * screen gets a fresh snapshot when it drains; a heartbeat is simply not needed).
   */
  private write(s: Stream, text: string, isEvent: boolean): void {
    if (s.blockedSince !== undefined) {
      if (isEvent) s.missed = true;
      return;
    }
    if (s.res.write(text)) return;
    s.blockedSince = this.now();
    s.res.once('drain', () => {
      s.blockedSince = undefined;
      if (!s.missed || !this.streams.has(s)) return;
      s.missed = false;
      const snap = this.snapshot(s.dcpKey);
      if (snap) {
        this.send(s, 'snapshot', snap);
        s.shiftStart = snap.shift.startsAt;
      }
    });
  }

  /** Closes every stream whose client has left its send buffer full for `stallMs`: its slot is free at once. */
  private closeStalled(): void {
    const t = this.now();
    for (const s of this.streams) {
      if (s.blockedSince === undefined || t - s.blockedSince < this.stallMs) continue;
      this.streams.delete(s);
      s.res.destroy();
      this.onStalled?.(s.remote, t - s.blockedSince);
    }
    if (this.streams.size === 0) this.stopTimers();
  }

  /** Known secrets cut out of every text the screen shows (raw reads and reasons). */
  private scrubbed<T>(value: T): T {
    return scrubValue(value, this.scrub) as T;
  }
}
