import type { StreamInputConfig } from './stream-schema.js';
import type { Logger } from '../../log.js';
import { rejectionItem } from '../input-items.js';
import type { IntakeItem, IntakeSink, ItemOutcome, SubmitResult } from '../types.js';
import type { VerdictReason } from '../../config/verdict-reasons.js';
import { configBytes, Framer, type FramerEvent, type OverlongEvent } from './framer.js';
import { type Clock, systemClock } from '../../clock.js';

/*
 * Everything between the bytes of one byte-stream source (a serial port, one TCP connection) and
 * the sink: framing (with the silence timer, and the pause timer that ends an overlong read being
 * dropped: `overlongPauseMs`), prefix/suffix stripping, submitting in arrival order, and writing
 * acknowledgement bytes back to the scanner.
 *
 * Acknowledgement (the `ackBytes`/`nakBytes` keys), once a submit resolved (committed), in the
 * reads' order, each as soon as its own submit is committed:
 * - `ackOn: verdict`: the intake hands back each item's verdict (src/intake/verdict.ts): `ackBytes`
 *   only for a read that became a scan (or a container's code that did its work), `nakBytes` for
 *   every other one, refused by the mapping, a duplicate, a no-read, and for each input-level
 *   rejection (empty, overlong, cut off, noise, a read holding the other line-end byte).
 * - `ackOn: commit` (the default for now): `ackBytes` for each read stored, whatever the mapping
 *   made of it, `nakBytes` for each input-level rejection.
 * `nakBytesByReason` replaces `nakBytes` for the reasons it names. When the sink refuses (buffer
 * failure), every item of that submit gets its NAK (reason `notTaken`) once at once, and the items
 * are kept and retried: the operator knows to look, and a scan again is harmless (the duplicate
 * window). An item nak'd that way is not answered again later.
 *
 * A scanner cannot resend, so refused items are kept in memory and retried with backoff, up to
 * {@link MAX_PENDING_ITEMS}; beyond that the oldest are dropped and logged.
 */

/** Reads held in memory while the buffer refuses them; beyond this the oldest are dropped (logged). */
export const MAX_PENDING_ITEMS = 10_000;
const SUBMIT_RETRY_MAX_MS = 30_000;

/** What a {@link FramedStream} needs: the input's id and framing keys, the sink, a logger. */
export interface FramedStreamOptions {
  inputId: string;
  config: StreamInputConfig;
  sink: IntakeSink;
  logger: Logger;
  /** Put in every item's `origin` (`{ port }`, `{ peer }`). */
  origin: Record<string, string | number>;
  now?: Clock;
  /** First delay before retrying a refused submit, in ms (doubles up to 30 s); default 500. */
  submitRetryBaseMs?: number;
  /**
   * Called with each item's verdict once it is known (committed, or refused by the sink: `nak`
   * with code `notTaken`), in the items' order, after its bytes were written.
   */
  onVerdict?: (item: IntakeItem, verdict: StreamVerdict) => void;
}

/** The verdict of one item of a byte stream, as answered to the scanner. */
export interface StreamVerdict {
  verdict: 'ack' | 'nak';
  /** With `nak`: why. */
  code?: VerdictReason;
  /** What intake made of it; absent when the sink refused the submit. */
  outcome?: ItemOutcome;
}

interface PendingItem {
  item: IntakeItem;
  /** Already told the scanner "not taken" (nakBytes) after a refused submit. */
  nakked: boolean;
}

/**
 * One byte-stream source's path to the sink (see the comment at the top of this file): framing,
 * stripping, ordered submits with retry, ack/nak bytes. One per serial port (for the input's life)
 * or TCP connection.
 *
 * @throws GatewayError `SCANGW_E_CONFIG` (constructor) when a byte key holds a character above U+00FF.
 */
export class FramedStream {
  private readonly framer: Framer;
  private readonly prefix: Buffer | undefined;
  private readonly suffix: Buffer | undefined;
  private readonly ack: Buffer | undefined;
  private readonly nak: Buffer | undefined;
  private readonly nakByReason = new Map<string, Buffer>();
  private readonly now: Clock;
  private readonly retryBaseMs: number;
  private writer: ((bytes: Buffer) => void) | undefined;
  private silenceTimer: NodeJS.Timeout | undefined;
  /** Armed while the framer drops an overlong read: a pause of `overlongPauseMs` ends it. */
  private pauseTimer: NodeJS.Timeout | undefined;
  private readonly pending: PendingItem[] = [];
  private draining: Promise<void> | undefined;
  private retryTimer: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  private closing = false;

  constructor(private readonly options: FramedStreamOptions) {
    const c = options.config;
    this.framer = new Framer({
      mode: c.framing,
      terminator: configBytes(c.terminator, 'terminator'),
      stx: configBytes(c.stx, 'stx')[0] ?? 0x02,
      etx: configBytes(c.etx, 'etx')[0] ?? 0x03,
      maxLength: c.maxReadLength,
      reportEmpty: true,
    });
    this.prefix =
      c.stripPrefix !== undefined ? configBytes(c.stripPrefix, 'stripPrefix') : undefined;
    this.suffix =
      c.stripSuffix !== undefined ? configBytes(c.stripSuffix, 'stripSuffix') : undefined;
    this.ack = c.ackBytes !== undefined ? configBytes(c.ackBytes, 'ackBytes') : undefined;
    this.nak = c.nakBytes !== undefined ? configBytes(c.nakBytes, 'nakBytes') : undefined;
    for (const [code, text] of Object.entries(c.nakBytesByReason ?? {}))
      if (text !== undefined)
        this.nakByReason.set(code, configBytes(text, `nakBytesByReason.${code}`));
    this.now = options.now ?? systemClock;
    this.retryBaseMs = options.submitRetryBaseMs ?? 500;
  }

  /** Where acknowledgement bytes go (the open port or socket); undefined while there is none. */
  setWriter(writer: ((bytes: Buffer) => void) | undefined): void {
    this.writer = writer;
  }

  /** Feeds bytes as received. */
  push(chunk: Buffer): void {
    const receivedAt = new Date(this.now());
    this.enqueue(this.framer.push(chunk), receivedAt);
    if (this.options.config.framing === 'silence') {
      clearTimeout(this.silenceTimer);
      this.silenceTimer = setTimeout(() => {
        this.silenceTimer = undefined;
        this.enqueue(this.framer.idle(), new Date(this.now()));
      }, this.options.config.silenceMs);
    } else {
      clearTimeout(this.pauseTimer);
      this.pauseTimer = undefined;
      if (this.framer.dropping) {
        this.pauseTimer = setTimeout(() => {
          this.pauseTimer = undefined;
          this.enqueue(this.framer.idle(), new Date(this.now()));
        }, this.options.config.overlongPauseMs);
      }
    }
  }

  /**
   * The source ended (device closed, connection lost): a read in progress becomes a rejection with
   * `reason` (in silence mode it is complete: its silence is the end).
   */
  end(reason: string): void {
    clearTimeout(this.silenceTimer);
    this.silenceTimer = undefined;
    clearTimeout(this.pauseTimer);
    this.pauseTimer = undefined;
    const silence = this.options.config.framing === 'silence';
    const events = [...(silence ? this.framer.idle() : []), ...this.framer.flush()];
    this.enqueue(events, new Date(this.now()), reason);
  }

  /** Items submitted or waiting, for tests and stop. */
  get backlog(): number {
    return this.pending.length;
  }

  /** Ends the source, tries once more to submit what waits, then drops (and logs) what still cannot be stored. */
  async close(reason: string): Promise<void> {
    this.end(reason);
    this.closing = true;
    this.kickDrain();
    // A pending retry would wait for a buffer that may never come back: try once more now.
    this.retryTimer?.resolve();
    await this.draining;
    if (this.pending.length > 0) {
      this.options.logger.error(
        { dropped: this.pending.length },
        'reads not stored because the buffer refused them until stop',
      );
      this.pending.length = 0;
    }
  }

  /** Resolves once every item so far is committed (or dropped by close). */
  async settled(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private enqueue(
    events: FramerEvent[],
    receivedAt: Date,
    partialReason = 'stream ended before the read was complete',
  ): void {
    if (events.length === 0) return;
    for (const event of events)
      this.pending.push({ item: this.toItem(event, receivedAt, partialReason), nakked: false });
    const excess = this.pending.length - MAX_PENDING_ITEMS;
    if (excess > 0) {
      this.pending.splice(0, excess);
      this.options.logger.error(
        { dropped: excess },
        'buffer has refused reads for too long; oldest reads dropped',
      );
    }
    this.kickDrain();
  }

  private toItem(event: FramerEvent, receivedAt: Date, partialReason: string): IntakeItem {
    const { inputId, origin } = this.options;
    switch (event.kind) {
      case 'frame': {
        const raw = this.strip(event.bytes);
        if (raw.length === 0)
          return rejectionItem(
            inputId,
            event.bytes,
            'empty read: nothing but the prefix or suffix it strips',
            receivedAt,
            origin,
            'empty',
          );
        return { kind: 'read', read: { inputId, raw, receivedAt, origin } };
      }
      case 'empty':
        return rejectionItem(inputId, EMPTY, event.reason, receivedAt, origin, 'empty');
      case 'overlong':
        return rejectionItem(
          inputId,
          event.head,
          this.overlongReason(event),
          receivedAt,
          origin,
          'overlong',
        );
      case 'noise':
      case 'lineEnd':
        return rejectionItem(inputId, event.bytes, event.reason, receivedAt, origin, 'framing');
      case 'partial': {
        const hint = this.framer.lineEndHint(event.bytes);
        return rejectionItem(
          inputId,
          event.bytes,
          hint ? `${partialReason}; ${hint}` : partialReason,
          receivedAt,
          origin,
          'framing',
        );
      }
    }
  }

  /** "read longer than 4096 bytes: 10240 bytes up to a pause of 200 ms were dropped; the first 256 are kept". */
  private overlongReason(event: OverlongEvent): string {
    const c = this.options.config;
    const where = {
      terminator: 'up to its terminator',
      etx: 'up to its ETX',
      stx: 'up to the next STX (its ETX never came)',
      pause: `up to a pause of ${c.framing === 'silence' ? c.silenceMs : c.overlongPauseMs} ms`,
      end: 'up to the end of the stream',
    }[event.end];
    const hint = this.framer.lineEndHint(event.head);
    return (
      `read longer than ${c.maxReadLength} bytes: ${event.length} bytes ${where} were dropped; the first ${event.head.length} are kept` +
      (hint ? `; ${hint}` : '')
    );
  }

  private strip(bytes: Buffer): Buffer {
    let out = bytes;
    if (
      this.prefix &&
      out.length >= this.prefix.length &&
      out.subarray(0, this.prefix.length).equals(this.prefix)
    )
      out = out.subarray(this.prefix.length);
    if (
      this.suffix &&
      out.length >= this.suffix.length &&
      out.subarray(out.length - this.suffix.length).equals(this.suffix)
    ) {
      out = out.subarray(0, out.length - this.suffix.length);
    }
    return out;
  }

  private kickDrain(): void {
    if (this.draining || this.pending.length === 0) return;
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      if (!this.closing) this.kickDrain();
    });
  }

  /** Submits pending items in arrival order, one call per batch; retries a refused batch with backoff. */
  private async drain(): Promise<void> {
    let attempt = 0;
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, this.pending.length);
      let result: SubmitResult | void;
      try {
        result = await this.options.sink.submit(batch.map((p) => p.item));
      } catch (err) {
        this.answer(batch, undefined);
        this.pending.unshift(...batch);
        if (this.closing) return;
        const delayMs = Math.min(SUBMIT_RETRY_MAX_MS, this.retryBaseMs * 2 ** attempt);
        attempt += 1;
        this.options.logger.error(
          { err, items: batch.length, retryInMs: delayMs },
          'buffer refused reads; retrying',
        );
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          this.retryTimer = { timer, resolve };
        });
        if (this.retryTimer) clearTimeout(this.retryTimer.timer);
        this.retryTimer = undefined;
        continue;
      }
      attempt = 0;
      this.answer(batch, result ?? { outcomes: [] });
    }
  }

  /**
   * Writes ack/nak bytes for a batch (see the top of this file): `result` holds what intake made of
   * each item once committed; undefined when the sink refused the batch (each item nak'd once).
   */
  private answer(batch: PendingItem[], result: SubmitResult | undefined): void {
    const verdictMode = this.options.config.ackOn === 'verdict';
    const parts: Buffer[] = [];
    const told: { item: IntakeItem; verdict: StreamVerdict }[] = [];
    batch.forEach((p, i) => {
      if (p.nakked) return;
      const item = p.item;
      let verdict: StreamVerdict;
      if (!result) {
        verdict = { verdict: 'nak', code: 'notTaken' };
      } else {
        const outcome = result.outcomes[i];
        const code = item.kind === 'rejection' ? (item.rejection.code ?? 'refused') : undefined;
        if (verdictMode && outcome) {
          const v = outcome.verdict ?? (outcome.outcome === 'scan' ? 'ack' : 'nak');
          verdict = { verdict: v, outcome };
          const why = outcome.code ?? code;
          if (v === 'nak' && why !== undefined) verdict.code = why;
        } else {
          verdict =
            item.kind === 'read' ? { verdict: 'ack' } : { verdict: 'nak', code: code ?? 'refused' };
          if (outcome) verdict.outcome = outcome;
        }
      }
      const bytes =
        verdict.verdict === 'ack'
          ? this.ack
          : ((verdict.code !== undefined ? this.nakByReason.get(verdict.code) : undefined) ??
            this.nak);
      // Without NAK bytes the scanner was told nothing, so a later commit may still be answered.
      if (!result && bytes && this.writer) p.nakked = true;
      if (bytes) parts.push(bytes);
      if (!result && !bytes) return;
      told.push({ item, verdict });
    });
    if (parts.length > 0 && this.writer) {
      try {
        this.writer(Buffer.concat(parts));
      } catch (err) {
        this.options.logger.debug({ err }, 'writing acknowledgement bytes failed');
      }
    }
    const onVerdict = this.options.onVerdict;
    if (onVerdict) for (const t of told) onVerdict(t.item, t.verdict);
  }
}

const EMPTY = Buffer.alloc(0);
