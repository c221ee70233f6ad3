import type { BufferStore } from '../buffer/store.js';
import { ErrorCodes, isGatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { FetchResult } from '../upstream/status-topic.js';
import type { PollPace, StatusRef, StatusSource } from './status-tracker.js';
import type { ScanStatusLike } from './types.js';
import type { Clock } from '../clock.js';
import { LoopSleep } from '../loop.js';
import { StatusEventApplier } from './status-event-apply.js';

/** The part of the topic reader the feed uses (src/upstream/status-topic.ts); one instance per connection. */
export interface TopicReader {
  partitions(): Promise<number[]>;
  offsets(which: 'earliest' | 'latest' | { since: number }): Promise<Map<number, bigint>>;
  fetch(positions: ReadonlyMap<number, bigint>): Promise<FetchResult>;
  close(): Promise<void>;
}

/** Options of {@link StatusEventFeed}. */
export interface StatusEventFeedOptions {
  store: BufferStore;
  topic: string;
  /**
   * A new reader (a new connection); called again after each failure. May be async: the daemon
   * loads the Kafka client's modules on the first call, not at start, and a failure to load them is a
   * failed connection like any other.
   */
  connect: () => TopicReader | Promise<TopicReader>;
  /**
   * The status tracker's one door (`Deliverer.applyStatus`): an event is named by its requestId,
   * or, for an SFTP batch, by its file name or the references of its failures.
   */
  apply: (
    ref: StatusRef,
    status: ScanStatusLike,
    source: StatusSource,
  ) => 'done' | 'resend' | 'waiting' | 'ignored';
  /** The pace changed (events flow, or stopped flowing): the tracker should look at its schedule now. */
  onPaceChange: () => void;
  safetyPollMs: number;
  maxLagEvents: number;
  staleAfterMs: number;
  logger: Logger;
  now: Clock;
  /** How long an event for a requestId not known yet is kept in case its upload is being recorded, ms (default 60 s). */
  holdMs?: number;
  /**
   * The turn to write the buffer beside the batch thread (`BatchThread.writing`, write-turn.ts),
   * waited for before a fetch's events are applied, instead of SQLite's busy handler sleeping on the
   * event loop. Without it, applied at once.
   */
  otherWriter?: () => Promise<void> | undefined;
  /** First and longest wait before connecting again after a failure, ms (defaults 1 s and 30 s). */
  retryBaseMs?: number;
  retryMaxMs?: number;
}

/**
 * `starting` (no reader made yet: the daemon starts the feed once it takes reads and loads the
 * Kafka client at the first connect), `connecting` (a reader made, no read yet),
 * `flowing`, `lagging` (behind or stale), `down` (the last attempt failed).
 */
export type FeedState = 'starting' | 'connecting' | 'flowing' | 'lagging' | 'down';

/** What the status and the metrics show of status events. Counters since start. */
export interface StatusEventsStatus {
  state: FeedState;
  topic: string;
  /** ISO instant the current state began. */
  since: string;
  /** The last failure, while `down` (and kept after for the record until the next one). */
  lastError?: { code: string; message: string; at: string };
  /** Events read from the topic. */
  received: number;
  /** Events that moved one of our batches (to its end, or recorded an intermediate state). */
  applied: number;
  /** Events about one of our batches that changed nothing (a repeat, after its end, or a state an SFTP batch does not record). */
  duplicates: number;
  /** Events for requestIds that are not this gateway's, and that name none of its SFTP batches (by file name or references). */
  ignored: number;
  /** Events that are not a status object (contract §2.8). */
  invalid: number;
  /** Events between the consumer's position and the end of the topic, over all partitions, at the last read. */
  lag: number;
  /** ISO instant of the last event read, if any. */
  lastEventAt?: string;
  /** ISO instant of the last successful read of the topic (answered, with or without events). */
  lastReadAt?: string;
}

/** A fetch that came back empty sooner than this is followed by a pause, so a broker that does not long-poll is not asked in a tight loop. */
const MIN_EMPTY_FETCH_MS = 200;
/** A topic never read is read from this long before the oldest unfinished batch (or now): clocks apart, an upload racing the first read. */
const FIRST_READ_MARGIN_MS = 5 * 60_000;

/**
 * Reads the status events of the service (contract §6) and hands each to the status
 * tracker, the one place a batch reaches its terminal state. The loop: connect (Metadata), find
 * each partition's position (stored in SQLite; a partition never read starts at the events
 * written since the oldest unfinished batch was formed, or since now, less 5 minutes), then fetch
 * and apply.
 *
 * - At-least-once, none lost: the effects of a fetch's events and the positions after them are
 *   written in ONE SQLite transaction, so after a crash the events after the stored position are
 *   read again, and one read twice changes nothing (the tracker ignores a batch not `uploaded`).
 * - An event is validated with the schema of a status answer (`scanStatusReadSchema`) and must
 *   name its `requestId`; anything else is counted invalid and logged at most once a minute.
 * - An event for a requestId that no batch has, before it counts as ignored, may be about one of
 *   our SFTP batches (which have no requestId of the service): when its `description`
 *   begins with the name of a batch's remote file ("<file name>: …", the convention in
 *   docs/delivery.md "SFTP", to confirm with the service operator) it goes to the tracker as
 *   `{ fileName }`; else, when its `failures` name references that a `transferred` batch holds,
 *   as `{ references }`. The tracker keeps the event's requestId on the batch, so a repeat is
 *   then known by it (a duplicate). A terminal event for an SFTP batch whose transfer is not
 *   recorded yet is held like the one below.
 * - An event for a requestId that no batch has yet, while an upload is in flight, is held up to
 *   `holdMs` (its upload's answer may not be recorded yet) and applied when the batch appears; one
 *   that finds no batch is counted ignored. A crash loses held events, not outcomes: the batch is
 *   then recovered or polled as before.
 * - The pace ({@link pace}): events flow when the last read succeeded within `staleAfterMs` and
 *   the lag is at most `maxLagEvents`; then polling slows to `safetyPollMs`. Otherwise polling
 *   runs at its normal pace and the status says why ({@link snapshot}).
 */
export class StatusEventFeed {
  private running = false;
  private loop: Promise<void> | undefined;
  private reader: TopicReader | undefined;
  /** Aborted at {@link stop}: ends the retry's or the empty fetch's sleep. */
  private stopping = new AbortController();
  private readonly sleeps = new LoopSleep();
  private state: FeedState = 'starting';
  private stateSince: number;
  private lastError: StatusEventsStatus['lastError'];
  private lag = 0;
  private lastEventAt: number | undefined;
  private lastReadAt: number | undefined;
  private failuresInARow = 0;
  private lastPaceEvents = false;
  private reconnecting = false;
  /** Each event read: validated, applied or held, counted (status-event-apply.ts). */
  private readonly events: StatusEventApplier;

  constructor(private readonly options: StatusEventFeedOptions) {
    this.stateSince = options.now();
    this.events = new StatusEventApplier(options);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.stopping = new AbortController();
    this.loop = this.run();
  }

  /** Stops reading: the fetch in flight is abandoned (its events are read again after a start), the connection closed. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopping.abort();
    const reader = this.reader;
    this.reader = undefined;
    await reader?.close();
    await this.loop;
  }

  /**
   * Drops the connection and makes a new one at once (new credentials after a reload): no
   * failure is counted, and the positions read so far are kept.
   */
  async reconnect(): Promise<void> {
    if (!this.running) return;
    const reader = this.reader;
    // No connection (waiting to retry): the next attempt, made now, uses the new credentials.
    if (!reader) return this.sleeps.interrupt();
    this.reconnecting = true;
    this.reader = undefined;
    await reader.close();
  }

  /** A batch became `uploaded`: held events may be for it. */
  batchUploaded(): void {
    if (this.events.heldCount() > 0) this.events.retryHeld();
  }

  /** The pace of status polling now: see {@link StatusEventFeed}. Checked by the tracker at each schedule. */
  pace(): PollPace {
    const events = this.running && this.currentState() === 'flowing';
    if (events !== this.lastPaceEvents) {
      this.lastPaceEvents = events;
      this.options.logger.info(
        { topic: this.options.topic, state: this.currentState() },
        events
          ? 'status events flow: polling slows to the safety interval'
          : 'status events do not flow: polling at its normal pace',
      );
    }
    return { events, safetyPollMs: this.options.safetyPollMs };
  }

  snapshot(): StatusEventsStatus {
    const state = this.currentState();
    return {
      state,
      topic: this.options.topic,
      since: new Date(this.stateSince).toISOString(),
      ...(this.lastError ? { lastError: this.lastError } : {}),
      ...this.events.counters,
      lag: this.lag,
      ...(this.lastEventAt !== undefined
        ? { lastEventAt: new Date(this.lastEventAt).toISOString() }
        : {}),
      ...(this.lastReadAt !== undefined
        ? { lastReadAt: new Date(this.lastReadAt).toISOString() }
        : {}),
    };
  }

  /** The state with the clock: a read too long ago makes `flowing` into `lagging` even while a fetch hangs. */
  private currentState(): FeedState {
    if (this.state !== 'flowing') return this.state;
    const stale =
      this.lastReadAt === undefined ||
      this.options.now() - this.lastReadAt > this.options.staleAfterMs;
    return stale || this.lag > this.options.maxLagEvents ? 'lagging' : 'flowing';
  }

  private setState(state: FeedState): void {
    if (state === this.state) return;
    this.state = state;
    this.stateSince = this.options.now();
    this.options.onPaceChange();
  }

  private async run(): Promise<void> {
    const base = this.options.retryBaseMs ?? 1000;
    const max = this.options.retryMaxMs ?? 30_000;
    while (this.running) {
      try {
        await this.session();
      } catch (err) {
        if (!this.running) break;
        if (this.reconnecting) {
          this.reconnecting = false;
          this.options.logger.info({ topic: this.options.topic }, 'status events: reconnecting');
          continue;
        }
        this.failed(err);
        await this.reader?.close();
        this.reader = undefined;
        await this.sleep(Math.min(max, base * 2 ** Math.min(this.failuresInARow - 1, 10)));
      }
    }
  }

  /** One connection: positions, then fetch and apply until a failure or the stop. */
  private async session(): Promise<void> {
    const { store, topic, now } = this.options;
    const reader = await this.options.connect();
    this.reader = reader;
    if (!this.running) {
      // Stopped while the reader was being made (its modules loading): stop() found no reader to close.
      this.reader = undefined;
      await reader.close();
      return;
    }
    if (this.state === 'starting') {
      // Not through setState: the pace does not change (no events either way).
      this.state = 'connecting';
      this.stateSince = now();
    }
    const partitions = await reader.partitions();
    const positions = store.positions.eventPositions(topic);
    const missing = partitions.filter((p) => !positions.has(p));
    if (missing.length > 0) {
      // A partition never read: from the events written since the oldest batch still waiting for
      // its outcome was formed (none of its events is older), or since now when none waits, less
      // FIRST_READ_MARGIN_MS for clocks apart and an upload racing this. Stored at once, so a
      // restart goes on from there.
      const oldest = store.batches
        .batchesInState('ready', 'uploading', 'presigned', 'uploaded')
        .reduce((min, b) => Math.min(min, Date.parse(b.createdAt) || min), now());
      const since = oldest - FIRST_READ_MARGIN_MS;
      const from = await reader.offsets({ since });
      store.atomically(() => {
        for (const p of missing) {
          positions.set(p, from.get(p) ?? 0n);
          store.positions.saveEventPosition(
            topic,
            p,
            positions.get(p)!,
            new Date(now()).toISOString(),
          );
        }
      });
      this.options.logger.info(
        { topic, partitions: missing, since: new Date(since).toISOString() },
        'status events: first read of the topic',
      );
    }
    for (const p of [...positions.keys()]) if (!partitions.includes(p)) positions.delete(p);
    while (this.running) {
      const started = now();
      const result = await reader.fetch(positions);
      if (!this.running) return;
      const writing = this.options.otherWriter?.();
      if (writing) await writing;
      if (!this.running) return;
      this.read(result, positions);
      if (result.outOfRange.length > 0)
        await this.resetOutOfRange(reader, result.outOfRange, positions);
      if (result.records.length === 0 && now() - started < MIN_EMPTY_FETCH_MS)
        await this.sleep(MIN_EMPTY_FETCH_MS);
    }
  }

  /** Applies a fetch's events and stores the positions after them, in one transaction. */
  private read(result: FetchResult, positions: Map<number, bigint>): void {
    const { store, topic, now } = this.options;
    const nowIso = new Date(now()).toISOString();
    store.atomically(() => {
      for (const record of result.records)
        this.events.handle(record.value, `${record.partition}:${record.offset}`);
      for (const [p, next] of result.next) {
        if (positions.get(p) !== next) store.positions.saveEventPosition(topic, p, next, nowIso);
      }
    });
    for (const [p, next] of result.next) positions.set(p, next);
    let lag = 0;
    for (const [p, end] of result.ends) {
      const behind = end - (positions.get(p) ?? end);
      if (behind > 0n) lag += Number(behind);
    }
    this.lag = lag;
    this.lastReadAt = now();
    if (result.records.length > 0) this.lastEventAt = this.lastReadAt;
    if (this.failuresInARow > 0) {
      this.options.logger.info(
        { topic, failuresInARow: this.failuresInARow },
        'status events: reading the topic again',
      );
      this.failuresInARow = 0;
    }
    this.setState('flowing');
    this.events.retryHeld();
    this.events.logInvalid(false);
  }

  private async resetOutOfRange(
    reader: TopicReader,
    partitions: number[],
    positions: Map<number, bigint>,
  ): Promise<void> {
    const { store, topic, now, logger } = this.options;
    const earliest = await reader.offsets('earliest');
    store.atomically(() => {
      for (const p of partitions) {
        const to = earliest.get(p) ?? 0n;
        logger.warn(
          { topic, partition: p, was: String(positions.get(p)), to: String(to) },
          'status events: the stored position is no longer in the topic (retention, or the topic was made again); reading from its earliest event; polling covers what was missed',
        );
        positions.set(p, to);
        store.positions.saveEventPosition(topic, p, to, new Date(now()).toISOString());
      }
    });
  }

  private failed(err: unknown): void {
    const code = isGatewayError(err) ? err.code : ErrorCodes.EVENTS_NETWORK;
    const message = (err as Error).message;
    const at = new Date(this.options.now()).toISOString();
    this.failuresInARow++;
    // The first failure, a change of cause, then every tenth: enough to see, not a line per retry.
    if (this.lastError?.code !== code || this.state !== 'down' || this.failuresInARow % 10 === 1) {
      this.options.logger.warn(
        { topic: this.options.topic, code, err: message, failuresInARow: this.failuresInARow },
        'status events cannot be read; polling at its normal pace',
      );
    }
    this.lastError = { code, message, at };
    this.setState('down');
  }

  private async sleep(ms: number): Promise<void> {
    await this.sleeps.sleep(ms, this.stopping.signal);
  }
}

export { fileNameOf } from './status-event-apply.js';
