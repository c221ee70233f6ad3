import { ErrorCodes, GatewayError, isDiskFull } from '../errors.js';
import type { Logger } from '../log.js';
import type { FileChunk, FileProgress, IntakeItem, IntakeSink, SubmitOptions, SubmitResult } from '../inputs/types.js';
import { DUPLICATE_WINDOW_MAX_ENTRIES, DuplicateWindow } from '../mapping/duplicate-window.js';
import { mapRead, type MappingContext } from '../mapping/map-read.js';
import type { BufferStore, CommittedMessage, IntakeRecord } from './store.js';
import type { Clock } from '../clock.js';

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
  lastReadAt?: string;
}

/**
 * Most inputs counted at once. Counters are kept per configured input (dropped at a reload that
 * removes the input), so this is only the guard against reads naming inputs that do not exist.
 */
export const MAX_COUNTED_INPUTS = 1024;

/** What intake needs of back-pressure (buffer/back-pressure.ts). */
export interface IntakeGate {
  /** Answers why a commit adding these scans is refused, or undefined when it fits. */
  admit(scans: number, bytes: number): string | undefined;
  /** Why one submit alone can never fit the quota, or undefined. */
  tooLarge?(scans: number, bytes: number): string | undefined;
  /**
   * Why nothing may be written now (the disk is full), or undefined. Every submit is then
   * refused with `SCANGW_E_BUFFER_DISK_FULL` (retryable), as a commit failing with SQLITE_FULL is.
   */
  writesRefused?(): string | undefined;
  /** Called once before the admits of one group commit; ended by commitFailed or commitSucceeded. */
  beginGroup?(): void;
  commitFailed(err: unknown): void;
  commitSucceeded(): void;
}

interface Pending {
  records: IntakeRecord[];
  /** Scans among `records`, and their bytes (what the quota counts). */
  scans: number;
  scanBytes: number;
  file?: { inputId: string; hash: string; name?: string };
  message?: CommittedMessage & { dup: boolean };
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
  now?: Clock;
  /**
   * Longest a submit waits for others to share its transaction, in ms. Default 0: a group is what
   * was submitted in the same turn of the event loop, committed at its end (setImmediate); under
   * load the next group gathers while a commit runs, so groups grow with the load by themselves.
   * A fixed window of 2 ms was most of the publish-to-PUBACK time at 1,000 MQTT messages/s.
   */
  groupWindowMs?: number;
  /** Quota and full-disk handling; without it every commit is attempted. */
  gate?: IntakeGate;
  /**
   * Cuts known secrets out of a reason before it is stored (a refusal may quote the input, and
   * the input may hold a secret). The raw read is kept as received: it is the evidence.
   */
  scrub?: (text: string) => string;
}

/**
 * The sink every input hands its reads to: maps each read, then commits groups of submits in one
 * SQLite transaction (group commit), and resolves each submit only after its transaction committed,
 * which is when the input may acknowledge to its source.
 */
export class Intake implements IntakeSink {
  private readonly dedupe = new DuplicateWindow();
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** The checkpoint after a commit, run once the commit's sources were acknowledged. */
  private checkpoint: NodeJS.Immediate | undefined;
  private readonly counters = new Map<string, Counters>();
  private readonly now: Clock;
  private closed = false;
  private mapping: MappingContext;
  private evictionsLogged = 0;
  private evictionLoggedAt = -Infinity;
  lastCommitError: { message: string; at: string } | undefined;

  private readonly scrub: (text: string) => string;

  /** Rebuilds the duplicate window from the buffer ({@link restoreDuplicateWindow}). */
  constructor(private readonly options: IntakeOptions) {
    this.now = options.now ?? Date.now;
    this.scrub = options.scrub ?? ((text) => text);
    this.mapping = options.mapping;
    this.restoreDuplicateWindow();
  }

  /** Interim: the constructor still restores the duplicate window. */
  open(): void {}

  /**
   * Fills the duplicate window with the scans committed within each DCP's `duplicateWindowMs`
   * before now (by commit time), newest first, so a read repeated across a restart is still a
   * duplicate. Reads at most the window's bound of rows. Answers how many references it took.
   */
  restoreDuplicateWindow(): number {
    const windows = new Map<string, number>();
    for (const [key, dcp] of this.mapping.dcps) if (dcp.duplicateWindowMs > 0) windows.set(key, dcp.duplicateWindowMs);
    if (windows.size === 0) return 0;
    const nowMs = this.now();
    const horizon = nowMs - Math.max(...windows.values());
    const rows = this.options.store.recentScans(horizon, DUPLICATE_WINDOW_MAX_ENTRIES);
    let restored = 0;
    // Oldest first, so the window's own order (what its bound drops first) is the order taken.
    for (let i = rows.length - 1; i >= 0; i--) {
      const r = rows[i]!;
      const windowMs = windows.get(r.dcpKey);
      if (windowMs === undefined || r.createdAt < nowMs - windowMs) continue;
      this.dedupe.restore(r.dcpKey, r.reference, Date.parse(r.timeUtc), windowMs);
      restored++;
    }
    if (restored > 0) this.options.logger.info({ references: restored }, 'duplicate window rebuilt from the scans committed within it');
    return restored;
  }

  /** Replaces the mapping (after a configuration reload); reads submitted later use it. */
  setMapping(mapping: MappingContext): void {
    this.mapping = mapping;
    // The counters of an input removed by the reload would never be shown again: drop them.
    for (const id of this.counters.keys()) if (!mapping.inputs.has(id)) this.counters.delete(id);
  }

  /** Inputs with counters held now (bounded by {@link MAX_COUNTED_INPUTS}). */
  countedInputs(): number {
    return this.counters.size;
  }

  /**
   * Maps the items and commits them with the next group. Resolves once committed; rejects with
   * `SCANGW_E_BUFFER` when the commit failed (`SCANGW_E_BUFFER_DISK_FULL`, `isDiskFull(err)`: the
   * disk is full) or `SCANGW_E_BUFFER_QUOTA` when the quota refused the scans (`isQuotaRefusal`):
   * nothing of this submit was then written, and the source must keep it.
   * `SCANGW_E_BUFFER_TOO_LARGE` (`isTooLargeForBuffer`, also a quota refusal): the submit alone is
   * larger than the quota and will never be taken. `SCANGW_E_NOT_RUNNING` once intake is closed.
   */
  submit(items: IntakeItem[], options: SubmitOptions = {}): Promise<SubmitResult> {
    if (this.closed) return Promise.reject(new GatewayError(ErrorCodes.NOT_RUNNING, 'intake is closed', { retryable: true }));
    const pending: Pending = { records: [], scans: 0, scanBytes: 0, taken: [], resolve: () => {}, reject: () => {} };
    const first = items[0];
    if (options.fileHash !== undefined && first) {
      const inputId = first.kind === 'read' ? first.read.inputId : first.rejection.inputId;
      pending.file = { inputId, hash: options.fileHash, ...(options.fileName !== undefined ? { name: options.fileName } : {}) };
    }
    if (options.message !== undefined && first) {
      const inputId = first.kind === 'read' ? first.read.inputId : first.rejection.inputId;
      pending.message = { inputId, ...options.message };
    }
    if (options.fileChunk) pending.chunk = options.fileChunk;
    for (const item of items) pending.records.push(this.toRecord(item, pending));
    const done = new Promise<SubmitResult>((resolve, reject) => {
      pending.resolve = resolve;
      pending.reject = reject;
    });
    this.queue.push(pending);
    if (this.timer === undefined) {
      const windowMs = this.options.groupWindowMs ?? 0;
      this.timer = windowMs > 0 ? setTimeout(() => this.flush(), windowMs) : setImmediate(() => this.flush());
    }
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
        reason: this.scrub(r.reason),
        inputLevel: true,
        ...(r.origin ? { origin: r.origin } : {}),
      };
    }
    const read = item.read;
    // One object per read, filled in place: this runs for every read (no spread copies).
    const record: IntakeRecord = { inputId: read.inputId, receivedAt: read.receivedAt, raw: read.raw, outcome: 'scan' };
    if (read.sourceTime !== undefined) record.sourceTime = read.sourceTime;
    if (read.dcpKey !== undefined) record.dcpKey = read.dcpKey;
    if (read.parents && read.parents.length > 0) record.parents = read.parents;
    if (read.attributes) record.attributes = read.attributes;
    if (read.origin) record.origin = read.origin;
    const result = mapRead(read, this.mapping);
    if (result.outcome === 'noRead') {
      record.outcome = 'noRead';
      if (result.reason) record.reason = this.scrub(result.reason);
      return record;
    }
    if (result.outcome === 'rejected') {
      record.outcome = 'rejected';
      record.reason = this.scrub(result.reason);
      return record;
    }
    const { scan, instant } = result;
    const window = this.mapping.dcps.get(scan.dcpKey)?.duplicateWindowMs ?? 0;
    const duplicate = this.dedupe.check(scan.dcpKey, scan.reference, instant.getTime(), window);
    if (this.dedupe.evicted > this.evictionsLogged) this.logEvictions();
    if (duplicate) {
      record.outcome = 'duplicate';
      record.reason = `same reference at ${scan.dcpKey} within ${window} ms`;
      return record;
    }
    if (window > 0) pending.taken.push({ dcpKey: scan.dcpKey, reference: scan.reference, atMs: instant.getTime() });
    // A flagged time stamp (timeCheck) is kept as the read's reason; the scan is sent all the same.
    if (result.timeWarning) record.reason = result.timeWarning;
    const body = JSON.stringify(scan);
    const bytes = Buffer.byteLength(body);
    pending.scans++;
    pending.scanBytes += bytes;
    record.scan = { reference: scan.reference, dcpKey: scan.dcpKey, instant, body, bytes };
    return record;
  }

  private cancelTimer(): void {
    const t = this.timer;
    if (t === undefined) return;
    if ('refresh' in t) clearTimeout(t);
    else clearImmediate(t);
    this.timer = undefined;
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
    const full = gate?.writesRefused?.();
    if (full !== undefined) {
      // Nothing written: the sources keep their reads and retry; the room is delivery's.
      const refusal = new GatewayError(ErrorCodes.BUFFER_DISK_FULL, full, { retryable: true });
      for (const p of queued) {
        forget(p);
        p.reject(refusal);
      }
      return;
    }
    const group: Pending[] = [];
    let scans = 0;
    let bytes = 0;
    gate?.beginGroup?.();
    for (const p of queued) {
      if (p.message?.dup && store.knownMessage(p.message)) {
        // The broker's resend of a message committed before whose PUBACK it never had: acknowledge only.
        forget(p);
        const counters = this.countersOf(p.message.inputId);
        if (counters) counters.redelivered++;
        p.resolve({ outcomes: [], redelivered: true });
        continue;
      }
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
      const adds = p.scans;
      const addBytes = p.scanBytes;
      const never = adds > 0 ? gate?.tooLarge?.(adds, addBytes) : undefined;
      if (never !== undefined) {
        forget(p);
        p.reject(new GatewayError(ErrorCodes.BUFFER_TOO_LARGE, never, { retryable: false }));
        continue;
      }
      const refused = adds > 0 ? gate?.admit(scans + adds, bytes + addBytes) : undefined;
      if (refused !== undefined) {
        forget(p);
        p.reject(new GatewayError(ErrorCodes.BUFFER_QUOTA, refused, { retryable: true }));
        continue;
      }
      scans += adds;
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
    const messages = group.flatMap((p) => (p.message ? [p.message] : []));
    try {
      store.commitIntake(records, this.now(), files, messages);
    } catch (err) {
      // Nothing was written: forget the references taken so the source's retry is not a duplicate.
      for (const p of group) forget(p);
      const diskFull = isDiskFull(err);
      this.lastCommitError = { message: (err as Error).message, at: new Date(this.now()).toISOString() };
      gate?.commitFailed(err);
      logger.error({ err, reads: records.length, diskFull }, 'commit of reads failed; sources are not acknowledged');
      const refusal = new GatewayError(
        diskFull ? ErrorCodes.BUFFER_DISK_FULL : ErrorCodes.BUFFER,
        diskFull ? `the buffer's disk is full: ${(err as Error).message}` : `commit of reads failed: ${(err as Error).message}`,
        { cause: err, retryable: true },
      );
      for (const p of group) p.reject(refusal);
      return;
    }
    this.lastCommitError = undefined;
    // Queued before the sources' acknowledgements (promise reactions, written on the next tick) yet
    // run after them: an immediate runs once the ticks and microtasks of this turn are done.
    this.checkpoint ??= setImmediate(() => {
      this.checkpoint = undefined;
      store.checkpointAfterCommit();
    });
    gate?.commitSucceeded();
    for (const r of records) this.countCommitted(r);
    for (const p of group) p.resolve(outcomesOf(p));
    if (records.some((r) => r.outcome === 'scan')) this.options.onScansCommitted?.();
  }

  /** At the duplicate window's bound: once per 10 minutes, with how many references it dropped. */
  private logEvictions(): void {
    const at = this.now();
    if (at - this.evictionLoggedAt < 600_000) return;
    this.options.logger.warn(
      { dropped: this.dedupe.evicted - this.evictionsLogged, bound: DUPLICATE_WINDOW_MAX_ENTRIES },
      'duplicate window full: the oldest references were dropped, so a repeat of one of them within its window is sent again',
    );
    this.evictionsLogged = this.dedupe.evicted;
    this.evictionLoggedAt = at;
  }

  /** Commits whatever is queued now; after this, submits are refused. */
  close(): void {
    this.cancelTimer();
    this.flush();
    clearImmediate(this.checkpoint);
    this.checkpoint = undefined;
    this.closed = true;
  }

  countersFor(inputId: string): InputCounters {
    const { lastReadAtDate, ...counters } = this.counters.get(inputId) ?? emptyCounters();
    return lastReadAtDate ? { ...counters, lastReadAt: lastReadAtDate.toISOString() } : counters;
  }

  /** See {@link IntakeSink.forgetMessages}. */
  forgetMessages(inputId: string): void {
    const removed = this.options.store.forgetMessages(inputId);
    if (removed > 0) this.options.logger.info({ inputId, removed }, 'broker holds no session for this input: its message identities are forgotten');
  }

  /** The input's counters; undefined for an input no longer configured once {@link MAX_COUNTED_INPUTS} are counted. */
  private countersOf(inputId: string): Counters | undefined {
    let c = this.counters.get(inputId);
    if (!c) {
      if (this.counters.size >= MAX_COUNTED_INPUTS && !this.mapping.inputs.has(inputId)) return undefined;
      c = emptyCounters();
      this.counters.set(inputId, c);
    }
    return c;
  }

  /** Counted only once committed, so a failed commit that the source retries is not counted twice. */
  private countCommitted(r: IntakeRecord): void {
    const c = this.countersOf(r.inputId);
    if (!c) return;
    c.bytes += r.raw.length;
    // Formatted when asked for (countersFor), not once per read.
    c.lastReadAtDate = r.receivedAt;
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

/** The counters as kept: the time of the last read as received, formatted by {@link Intake.countersFor}. */
type Counters = Omit<InputCounters, 'lastReadAt'> & { lastReadAtDate?: Date };

function emptyCounters(): Counters {
  return { reads: 0, scans: 0, noReads: 0, rejections: 0, duplicates: 0, redelivered: 0, bytes: 0 };
}
