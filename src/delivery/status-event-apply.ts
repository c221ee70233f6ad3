import { readScanStatus, scanStatusReadSchema, TERMINAL_STATES } from '@scan-gateway/contract';
import { NOT_JSON, safeJson } from '../upstream/answer-body.js';
import type { StatusEventFeedOptions } from './status-events.js';
import type { StatusRef } from './status-tracker.js';
import type { ScanStatusLike } from './types.js';

/** Most events held for a requestId not known yet (their uploads are being recorded). */
const MAX_HELD = 10_000;
/** Invalid events: at most one log line per this interval. */
const INVALID_LOG_INTERVAL_MS = 60_000;

/** What the feed counts of the events it read (see `StatusEventsStatus`). */
export interface EventCounters {
  received: number;
  applied: number;
  duplicates: number;
  ignored: number;
  invalid: number;
}

/**
 * What {@link StatusEventFeed} does with each event it read, apart from the topic: validates it,
 * hands it to the tracker's door (by requestId, else as one of the SFTP batches), holds it while
 * its upload may be being recorded, and counts it. Never throws for a bad event; the log of
 * invalid events is kept to one line a minute.
 */
export class StatusEventApplier {
  /** Counters since start, for the status. */
  readonly counters: EventCounters = {
    received: 0,
    applied: 0,
    duplicates: 0,
    ignored: 0,
    invalid: 0,
  };
  private readonly held = new Map<string, { status: ScanStatusLike; at: number }>();
  private invalidUnlogged = 0;
  private invalidLoggedAt = 0;
  private lastInvalidReason = '';

  constructor(
    private readonly options: Pick<
      StatusEventFeedOptions,
      'store' | 'apply' | 'now' | 'logger' | 'topic' | 'holdMs'
    >,
  ) {}

  /** Events held for a requestId not known yet. */
  heldCount(): number {
    return this.held.size;
  }

  /** One event: validated, then through the tracker's door. Never throws for a bad event. */
  handle(value: Buffer | null, where: string): void {
    this.counters.received++;
    const body = value === null ? NOT_JSON : safeJson(value.toString('utf8'));
    const wire = body === NOT_JSON ? undefined : scanStatusReadSchema.safeParse(body);
    if (!wire?.success || wire.data.requestId === undefined) {
      const reason =
        body === NOT_JSON
          ? 'not JSON'
          : !wire?.success
            ? (wire?.error.issues
                .map((i) => `${i.path.join('.') || '(event)'}: ${i.message}`)
                .slice(0, 3)
                .join('; ') ?? 'invalid')
            : 'no requestId';
      this.invalid(`${where}: ${reason}`);
      return;
    }
    const status = readScanStatus(wire.data, wire.data.requestId);
    this.applyOne(status, true);
  }

  /** Applies one valid event; `fresh` when it just came from the topic (else it was held). Answers whether it was settled. */
  private applyOne(status: ScanStatusLike, fresh: boolean): boolean {
    const outcome = this.options.apply({ requestId: status.requestId }, status, 'event');
    if (outcome !== 'ignored') {
      this.counters.applied++;
      return true;
    }
    const batch = this.options.store.batches.batchByRequestId(status.requestId);
    if (batch && batch.state !== 'presigned' && batch.state !== 'uploading') {
      // Ours, but not waiting for an outcome: a repeat, or a state after its end.
      this.counters.duplicates++;
      return true;
    }
    const sftp = batch === undefined ? this.applySftp(status) : 'none';
    if (sftp === 'applied' || sftp === 'duplicate') {
      this.counters[sftp === 'applied' ? 'applied' : 'duplicates']++;
      return true;
    }
    const inFlight =
      batch !== undefined ||
      sftp === 'early' ||
      this.options.store.batches.batchesInState('uploading', 'presigned').length > 0;
    if (!inFlight) {
      this.counters.ignored++;
      return true;
    }
    if (fresh) {
      // Its upload may be being recorded right now: keep it a little (the latest state wins).
      if (this.held.size >= MAX_HELD && !this.held.has(status.requestId)) {
        const oldest = this.held.keys().next().value as string;
        this.held.delete(oldest);
        this.counters.ignored++;
      }
      const previous = this.held.get(status.requestId);
      // The one it replaces changed nothing: counted, so every event received is counted once.
      if (previous) this.counters.duplicates++;
      this.held.set(status.requestId, { status, at: previous?.at ?? this.options.now() });
    }
    return false;
  }

  /**
   * An event whose requestId is not ours, tried against the SFTP batches (see {@link StatusEventFeed}):
   * `applied` (it moved one), `duplicate` (about one, changed nothing), `early` (a terminal
   * event about a batch whose transfer is not recorded as done yet: hold it), `none` (not about one).
   */
  private applySftp(status: ScanStatusLike): 'applied' | 'duplicate' | 'early' | 'none' {
    const { store, apply } = this.options;
    const fileName = fileNameOf(status.description);
    const named = fileName === undefined ? undefined : store.batches.batchByRemoteName(fileName);
    let ref: StatusRef | undefined;
    let batch = named?.mode === 'sftp' ? named : undefined;
    if (batch) ref = { fileName: fileName! };
    else {
      const references = [...new Set((status.failures ?? []).map((f) => f.reference))];
      batch =
        references.length > 0 ? store.batches.transferredBatchOfReferences(references) : undefined;
      if (batch) ref = { references };
    }
    if (!batch || !ref) return 'none';
    if (apply(ref, status, 'event') === 'done') return 'applied';
    // Ours, and nothing changed: after its end (the service spoke already), a state an SFTP batch
    // does not record (Received, InProgress), or a terminal one that came before the transfer was
    // recorded (held, and applied once the batch is `uploaded`).
    const terminal = (TERMINAL_STATES as readonly string[]).includes(status.state);
    return terminal && batch.state !== 'done' ? 'early' : 'duplicate';
  }

  /** Applies the held events again; drops those held longer than `holdMs` (counted ignored). */
  retryHeld(): void {
    const holdMs = this.options.holdMs ?? 60_000;
    const now = this.options.now();
    for (const [requestId, { status, at }] of [...this.held]) {
      let settled = false;
      try {
        settled = this.applyOne(status, false);
      } catch (err) {
        this.options.logger.warn(
          { err, requestId },
          'status events: applying a held event failed; kept',
        );
      }
      if (settled) this.held.delete(requestId);
      else if (now - at > holdMs) {
        this.held.delete(requestId);
        this.counters.ignored++;
      }
    }
  }

  private invalid(reason: string): void {
    this.counters.invalid++;
    this.invalidUnlogged++;
    this.lastInvalidReason = reason;
    this.logInvalid(true);
  }

  /** At most one line per interval: how many invalid events, and the latest reason. */
  logInvalid(justSeen: boolean): void {
    const now = this.options.now();
    if (this.invalidUnlogged === 0 || now - this.invalidLoggedAt < INVALID_LOG_INTERVAL_MS) return;
    if (!justSeen && this.invalidLoggedAt === 0) return;
    this.options.logger.warn(
      {
        topic: this.options.topic,
        invalid: this.invalidUnlogged,
        totalInvalid: this.counters.invalid,
        latest: this.lastInvalidReason,
      },
      'status events that are not a status object (contract §2.8) were skipped',
    );
    this.invalidUnlogged = 0;
    this.invalidLoggedAt = now;
  }
}

/**
 * The remote file name a status's `description` names, by the convention of docs/delivery.md
 * "SFTP" (an assumption to confirm with the service operator; contract §4.7 shows no SFTP details):
 * the text before the first ": ", or the whole description when it has none; a path is reduced to
 * its last part. Undefined when there is no description, or the name is empty or too long (255, a
 * file name's limit on common file systems).
 */
export function fileNameOf(description: string | undefined): string | undefined {
  if (description === undefined) return undefined;
  const colon = description.indexOf(': ');
  const named = (colon < 0 ? description : description.slice(0, colon)).trim();
  const name = named.slice(named.lastIndexOf('/') + 1);
  return name.length === 0 || name.length > 255 ? undefined : name;
}
