import { ErrorCodes, GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { FileChunk, FileProgress, IntakeItem, IntakeSink, SubmitOptions, SubmitResult } from '../inputs/types.js';
import { DuplicateWindow } from '../mapping/duplicate-window.js';
import { mapRead, type MappingContext } from '../mapping/map-read.js';
import { isDiskFull, type BufferStore, type IntakeRecord } from './store.js';

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

/** What intake needs of back-pressure (buffer/back-pressure.ts). */
export interface IntakeGate {
  /** Answers why a commit adding these scans is refused, or undefined when it fits. */
  admit(scans: number, bytes: number): string | undefined;
  /** Why one submit alone can never fit the quota, or undefined. */
  tooLarge?(scans: number, bytes: number): string | undefined;
  /** Called once before the admits of one group commit; ended by commitFailed or commitSucceeded. */
  beginGroup?(): void;
  commitFailed(err: unknown): void;
  commitSucceeded(): void;
}

interface Pending {
  records: IntakeRecord[];
  file?: { inputId: string; hash: string; name?: string };
  chunk?: FileChunk;
  taken: { dcpKey: string; reference: string; atMs: number }[];
  resolve: (result: SubmitResult) => void;
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
  /** Quota and full-disk handling; without it every commit is attempted. */
  gate?: IntakeGate;
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

  /**
   * Maps the items and commits them with the next group. Resolves once committed; rejects with
   * `SCANGW_E_BUFFER` when the commit failed (`details.diskFull`) or the quota refused the scans
   * (`details.quota`): nothing of this submit was then written, and the source must keep it.
   * `details.tooLarge`: the submit alone is larger than the quota and will never be taken.
   */
  submit(items: IntakeItem[], options: SubmitOptions = {}): Promise<SubmitResult> {
    if (this.closed) return Promise.reject(new Error('intake is closed'));
    const pending: Pending = { records: [], taken: [], resolve: () => {}, reject: () => {} };
    const first = items[0];
    if (options.fileHash !== undefined && first) {
      const inputId = first.kind === 'read' ? first.read.inputId : first.rejection.inputId;
      pending.file = { inputId, hash: options.fileHash, ...(options.fileName !== undefined ? { name: options.fileName } : {}) };
    }
    if (options.fileChunk) pending.chunk = options.fileChunk;
    for (const item of items) pending.records.push(this.toRecord(item, pending));
    const done = new Promise<SubmitResult>((resolve, reject) => {
      pending.resolve = resolve;
      pending.reject = reject;
    });
    this.queue.push(pending);
    this.timer ??= setTimeout(() => this.flush(), this.options.groupWindowMs ?? 2);
    return done;
  }

  /** How far a file with this content is committed: complete (in `files`), or items of a file in progress. */
  fileProgress(inputId: string, hash: string): FileProgress | undefined {
    const { store } = this.options;
    if (store.knownFile(inputId, hash)) return { items: 0, complete: true };
    const items = store.fileProgress(inputId, hash);
    return items === undefined ? undefined : { items, complete: false };
  }

  /** A chunk committed before (by the file's progress, or the whole file): acknowledged, not stored again. */
  private chunkCommittedBefore(p: Pending): boolean {
    const c = p.chunk;
    if (!c) return false;
    const { store } = this.options;
    if (c.remember && store.knownFile(c.inputId, c.hash)) return true;
    return p.records.length > 0 && (store.fileProgress(c.inputId, c.hash) ?? 0) >= c.itemsBefore + p.records.length;
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
      ...(read.parents && read.parents.length > 0 ? { parents: read.parents } : {}),
      ...(read.attributes ? { attributes: read.attributes } : {}),
      ...(read.origin ? { origin: read.origin } : {}),
    };
    const result = mapRead(read, this.mapping);
    if (result.outcome === 'noRead') return { ...base, outcome: 'noRead', ...(result.reason ? { reason: result.reason } : {}) };
    if (result.outcome === 'rejected') {
      return { ...base, outcome: 'rejected', reason: result.reason };
    }
    const { scan, instant } = result;
    const window = this.mapping.dcps.get(scan.dcpKey)?.duplicateWindowMs ?? 0;
    if (this.dedupe.check(scan.dcpKey, scan.reference, instant.getTime(), window)) {
      return { ...base, outcome: 'duplicate', reason: `same reference at ${scan.dcpKey} within ${window} ms` };
    }
    if (window > 0) pending.taken.push({ dcpKey: scan.dcpKey, reference: scan.reference, atMs: instant.getTime() });
    // A flagged time stamp (timeCheck) is kept as the read's reason; the scan is sent all the same.
    const flag = result.timeWarning ? { reason: result.timeWarning } : {};
    return { ...base, outcome: 'scan', ...flag, scan: { reference: scan.reference, dcpKey: scan.dcpKey, instant, body: JSON.stringify(scan) } };
  }

  private flush(): void {
    this.timer = undefined;
    const queued = this.queue;
    this.queue = [];
    if (queued.length === 0) return;
    const { store, gate, logger } = this.options;
    const forget = (p: Pending) => {
      for (const t of p.taken) this.dedupe.forget(t.dcpKey, t.reference, t.atMs);
    };
    const group: Pending[] = [];
    let scans = 0;
    let bytes = 0;
    gate?.beginGroup?.();
    for (const p of queued) {
      if (p.file && store.knownFile(p.file.inputId, p.file.hash)) {
        // Committed before (a crash came between the commit and the file's move): acknowledge only.
        forget(p);
        logger.warn({ inputId: p.file.inputId, file: p.file.name, hash: p.file.hash }, 'file with this content was stored before; not stored again');
        p.resolve(outcomesOf(p));
        continue;
      }
      if (this.chunkCommittedBefore(p)) {
        forget(p);
        logger.warn({ inputId: p.chunk?.inputId, file: p.chunk?.name, hash: p.chunk?.hash }, 'chunk of a file was stored before; not stored again');
        p.resolve(outcomesOf(p));
        continue;
      }
      const adds = p.records.filter((r) => r.scan);
      const addBytes = adds.reduce((n, r) => n + Buffer.byteLength(r.scan!.body), 0);
      const never = adds.length > 0 ? gate?.tooLarge?.(adds.length, addBytes) : undefined;
      if (never !== undefined) {
        forget(p);
        p.reject(new GatewayError(ErrorCodes.BUFFER, never, { retryable: false, details: { quota: true, tooLarge: true } }));
        continue;
      }
      const refused = adds.length > 0 ? gate?.admit(scans + adds.length, bytes + addBytes) : undefined;
      if (refused !== undefined) {
        forget(p);
        p.reject(new GatewayError(ErrorCodes.BUFFER, refused, { retryable: true, details: { quota: true } }));
        continue;
      }
      scans += adds.length;
      bytes += addBytes;
      group.push(p);
    }
    if (group.length === 0) return;
    const records = group.flatMap((p) => p.records);
    const files = group.flatMap((p) => {
      if (p.file) return [{ ...p.file, items: p.records.length }];
      const c = p.chunk;
      if (!c) return [];
      return [{ inputId: c.inputId, hash: c.hash, name: c.name, items: c.itemsBefore + p.records.length, inProgress: !c.final, remember: c.remember }];
    });
    try {
      store.commitIntake(records, this.now(), files);
    } catch (err) {
      // Nothing was written: forget the references taken so the source's retry is not a duplicate.
      for (const p of group) forget(p);
      const diskFull = isDiskFull(err);
      this.lastCommitError = { message: (err as Error).message, at: new Date(this.now()).toISOString() };
      gate?.commitFailed(err);
      logger.error({ err, reads: records.length, diskFull }, 'commit of reads failed; sources are not acknowledged');
      const refusal = new GatewayError(
        ErrorCodes.BUFFER,
        diskFull ? `the buffer's disk is full: ${(err as Error).message}` : `commit of reads failed: ${(err as Error).message}`,
        { cause: err, retryable: true, details: { diskFull } },
      );
      for (const p of group) p.reject(refusal);
      return;
    }
    this.lastCommitError = undefined;
    gate?.commitSucceeded();
    for (const r of records) this.countCommitted(r);
    for (const p of group) p.resolve(outcomesOf(p));
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

function outcomesOf(p: Pending): SubmitResult {
  return { outcomes: p.records.map((r) => ({ outcome: r.outcome, ...(r.reason !== undefined ? { reason: r.reason } : {}) })) };
}

function emptyCounters(): InputCounters {
  return { reads: 0, scans: 0, noReads: 0, rejections: 0, duplicates: 0, bytes: 0 };
}
