import type { Logger } from '../log.js';
import type { IntakeItem, IntakeSink } from '../inputs/types.js';
import { DuplicateWindow } from '../mapping/duplicate-window.js';
import { mapRead, type MappingContext } from '../mapping/map-read.js';
import type { BufferStore, IntakeRecord } from './store.js';

/** Per-input counters since the gateway started, for the health page and metrics. */
export interface InputCounters {
  reads: number;
  scans: number;
  noReads: number;
  rejections: number;
  duplicates: number;
  bytes: number;
  lastReadAt?: string;
}

interface Pending {
  records: IntakeRecord[];
  taken: { dcpKey: string; reference: string; atMs: number }[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface IntakeOptions {
  store: BufferStore;
  mapping: MappingContext;
  logger: Logger;
  /** Called after each commit that added scans, so delivery can wake up. */
  onScansCommitted?: () => void;
  now?: () => number;
  /** Longest a submit waits for others to share its transaction, in ms. */
  groupWindowMs?: number;
}

/**
 * The sink every input hands its reads to: maps each read, then commits groups of submits in one
 * SQLite transaction (group commit), and resolves each submit only after its transaction committed,
 * which is when the input may acknowledge to its source.
 */
export class Intake implements IntakeSink {
  private readonly dedupe = new DuplicateWindow();
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly counters = new Map<string, InputCounters>();
  private readonly now: () => number;
  private closed = false;
  private mapping: MappingContext;
  lastCommitError: { message: string; at: string } | undefined;

  constructor(private readonly options: IntakeOptions) {
    this.now = options.now ?? Date.now;
    this.mapping = options.mapping;
  }

  /** Replaces the mapping (after a configuration reload); reads submitted later use it. */
  setMapping(mapping: MappingContext): void {
    this.mapping = mapping;
  }

  submit(items: IntakeItem[]): Promise<void> {
    if (this.closed) return Promise.reject(new Error('intake is closed'));
    const pending: Pending = { records: [], taken: [], resolve: () => {}, reject: () => {} };
    for (const item of items) pending.records.push(this.toRecord(item, pending));
    const done = new Promise<void>((resolve, reject) => {
      pending.resolve = resolve;
      pending.reject = reject;
    });
    this.queue.push(pending);
    this.timer ??= setTimeout(() => this.flush(), this.options.groupWindowMs ?? 2);
    return done;
  }

  private toRecord(item: IntakeItem, pending: Pending): IntakeRecord {
    if (item.kind === 'rejection') {
      const r = item.rejection;
      return {
        inputId: r.inputId,
        receivedAt: r.receivedAt,
        raw: r.raw,
        outcome: 'rejected',
        reason: r.reason,
        inputLevel: true,
        ...(r.origin ? { origin: r.origin } : {}),
      };
    }
    const read = item.read;
    const base = {
      inputId: read.inputId,
      receivedAt: read.receivedAt,
      raw: read.raw,
      ...(read.sourceTime !== undefined ? { sourceTime: read.sourceTime } : {}),
      ...(read.dcpKey !== undefined ? { dcpKey: read.dcpKey } : {}),
      ...(read.origin ? { origin: read.origin } : {}),
    };
    const result = mapRead(read, this.mapping);
    if (result.outcome === 'noRead') return { ...base, outcome: 'noRead' };
    if (result.outcome === 'rejected') {
      return { ...base, outcome: 'rejected', reason: result.reason };
    }
    const { scan, instant } = result;
    const window = this.mapping.dcps.get(scan.dcpKey)?.duplicateWindowMs ?? 0;
    if (this.dedupe.check(scan.dcpKey, scan.reference, instant.getTime(), window)) {
      return { ...base, outcome: 'duplicate', reason: `same reference at ${scan.dcpKey} within ${window} ms` };
    }
    if (window > 0) pending.taken.push({ dcpKey: scan.dcpKey, reference: scan.reference, atMs: instant.getTime() });
    return { ...base, outcome: 'scan', scan: { reference: scan.reference, dcpKey: scan.dcpKey, instant, body: JSON.stringify(scan) } };
  }

  private flush(): void {
    this.timer = undefined;
    const group = this.queue;
    this.queue = [];
    if (group.length === 0) return;
    const records = group.flatMap((p) => p.records);
    try {
      this.options.store.commitIntake(records, this.now());
    } catch (err) {
      // Nothing was written: forget the references taken so the source's retry is not a duplicate.
      for (const p of group) for (const t of p.taken) this.dedupe.forget(t.dcpKey, t.reference, t.atMs);
      this.lastCommitError = { message: (err as Error).message, at: new Date(this.now()).toISOString() };
      this.options.logger.error({ err, reads: records.length }, 'commit of reads failed; sources are not acknowledged');
      for (const p of group) p.reject(err);
      return;
    }
    this.lastCommitError = undefined;
    for (const r of records) this.countCommitted(r);
    for (const p of group) p.resolve();
    if (records.some((r) => r.outcome === 'scan')) this.options.onScansCommitted?.();
  }

  /** Commits whatever is queued now; after this, submits are refused. */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.flush();
    this.closed = true;
  }

  countersFor(inputId: string): InputCounters {
    return { ...(this.counters.get(inputId) ?? emptyCounters()) };
  }

  /** Counted only once committed, so a failed commit that the source retries is not counted twice. */
  private countCommitted(r: IntakeRecord): void {
    let c = this.counters.get(r.inputId);
    if (!c) {
      c = emptyCounters();
      this.counters.set(r.inputId, c);
    }
    c.bytes += r.raw.length;
    c.lastReadAt = r.receivedAt.toISOString();
    // An input-level rejection (no read could be framed or parsed) has no mapping outcome of its own.
    if (!r.inputLevel) c.reads++;
    if (r.outcome === 'scan') c.scans++;
    else if (r.outcome === 'noRead') c.noReads++;
    else if (r.outcome === 'duplicate') c.duplicates++;
    else c.rejections++;
  }
}

function emptyCounters(): InputCounters {
  return { reads: 0, scans: 0, noReads: 0, rejections: 0, duplicates: 0, bytes: 0 };
}
