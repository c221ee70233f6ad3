import type { Logger } from '../log.js';
import type { IntakeRecord } from '../buffer/store.js';
import type { MappingContext } from '../mapping/map-read.js';

/** Per-input counters since the gateway started, for the health page and metrics. */
export interface InputCounters {
  reads: number;
  scans: number;
  noReads: number;
  rejections: number;
  duplicates: number;
  /**
   * MQTT messages the broker sent again (DUP) that were committed before (a crash or a lost
   * connection came between the commit and the PUBACK): acknowledged, not stored again.
   */
  redelivered: number;
  bytes: number;
  /** Attributes of a rule not sent because their source had no value (each noted with its read). Absent while 0. */
  attributesNotSent?: number;
  lastReadAt?: string;
}

/** Most distinct "attribute not sent" lines logged (one per input and attribute), so the log stays bounded. */
const MAX_LOGGED_NOT_SENT = 256;

/**
 * Most inputs counted at once. Counters are kept per configured input (dropped at a reload that
 * removes the input), so this is only the guard against reads naming inputs that do not exist.
 */
export const MAX_COUNTED_INPUTS = 1024;

/** The counters as kept: the time of the last read as received, formatted by {@link IntakeCounters.countersFor}. */
type Counters = Omit<InputCounters, 'lastReadAt'> & { lastReadAtDate?: Date };

function emptyCounters(): Counters {
  return { reads: 0, scans: 0, noReads: 0, rejections: 0, duplicates: 0, redelivered: 0, bytes: 0 };
}

/**
 * Intake's per-input counters and its "attribute not sent" notes: what the health page and
 * metrics show of each input. Counted when a record is committed, bounded by
 * {@link MAX_COUNTED_INPUTS} inputs and {@link MAX_LOGGED_NOT_SENT} logged lines.
 */
export class IntakeCounters {
  private readonly counters = new Map<string, Counters>();
  /** Rule attributes not sent, per record, counted when the record is committed. */
  private readonly notSent = new WeakMap<IntakeRecord, number>();
  /** Input and attribute of the "attribute not sent" lines already logged (once each). */
  private readonly loggedNotSent = new Set<string>();

  /**
   * @param mapping the mapping now (its inputs are always counted; others only below the cap)
   * @param scrub cuts known secrets out of a note before it is logged
   */
  constructor(
    private readonly logger: Logger,
    private readonly mapping: () => MappingContext,
    private readonly scrub: (text: string) => string,
  ) {}

  /** Drops the counters of inputs the mapping no longer has (after a reload). */
  keepOnly(mapping: MappingContext): void {
    // The counters of an input removed by the reload would never be shown again: drop them.
    for (const id of this.counters.keys()) if (!mapping.inputs.has(id)) this.counters.delete(id);
  }

  /** Inputs with counters held now (bounded by {@link MAX_COUNTED_INPUTS}). */
  size(): number {
    return this.counters.size;
  }

  countersFor(inputId: string): InputCounters {
    const { lastReadAtDate, ...counters } = this.counters.get(inputId) ?? emptyCounters();
    return lastReadAtDate ? { ...counters, lastReadAt: lastReadAtDate.toISOString() } : counters;
  }

  /** Counts an MQTT message the broker sent again that was committed before. */
  countRedelivered(inputId: string): void {
    const counters = this.countersOf(inputId);
    if (counters) counters.redelivered++;
  }

  /** The input's counters; undefined for an input no longer configured once {@link MAX_COUNTED_INPUTS} are counted. */
  private countersOf(inputId: string): Counters | undefined {
    let c = this.counters.get(inputId);
    if (!c) {
      if (this.counters.size >= MAX_COUNTED_INPUTS && !this.mapping().inputs.has(inputId))
        return undefined;
      c = emptyCounters();
      this.counters.set(inputId, c);
    }
    return c;
  }

  /** Counts the rule attributes a read did not get, and logs each input's attribute once. */
  noteNotSent(
    inputId: string,
    rule: string | undefined,
    notes: string[],
    record: IntakeRecord,
  ): void {
    this.notSent.set(record, notes.length);
    for (const note of notes) {
      const key = `${inputId}\u0000${note.slice(0, note.indexOf(':'))}`;
      if (this.loggedNotSent.has(key) || this.loggedNotSent.size >= MAX_LOGGED_NOT_SENT) continue;
      this.loggedNotSent.add(key);
      this.logger.warn(
        { inputId, rule, note: this.scrub(note) },
        'a rule attribute had no value and was not sent (logged once per input and attribute; each read keeps the note)',
      );
    }
  }

  /** Counted only once committed, so a failed commit that the source retries is not counted twice. */
  countCommitted(r: IntakeRecord): void {
    const c = this.countersOf(r.inputId);
    if (!c) return;
    c.bytes += r.raw.length;
    // Formatted when asked for (countersFor), not once per read.
    c.lastReadAtDate = r.receivedAt;
    // An input-level rejection (no read could be framed or parsed) has no mapping outcome of its own.
    if (!r.inputLevel) c.reads++;
    if (r.outcome === 'scan') {
      c.scans++;
      const notSent = this.notSent.get(r);
      if (notSent !== undefined) c.attributesNotSent = (c.attributesNotSent ?? 0) + notSent;
    } else if (r.outcome === 'noRead') c.noReads++;
    else if (r.outcome === 'duplicate') c.duplicates++;
    else c.rejections++;
  }
}
