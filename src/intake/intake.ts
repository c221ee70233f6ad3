import { ErrorCodes, GatewayError, isDiskFull } from '../errors.js';
import type { Logger } from '../log.js';
import type {
  FileChunk,
  FileProgress,
  IntakeItem,
  IntakeSink,
  ItemOutcome,
  SubmitOptions,
  SubmitResult,
} from '../inputs/types.js';
import { mapRead, type MappingContext } from '../mapping/map-read.js';
import type { IntakeWrites } from '../buffer/intake-writes.js';
import type {
  BufferStore,
  CommittedFile,
  CommittedMessage,
  IntakeRecord,
} from '../buffer/store.js';
import type { Clock } from '../clock.js';
import { IntakeDuplicates, type TakenReference } from './duplicates.js';
import type { IntakeFence } from './fence.js';
import { refusalAfter, SLICE_MAP_BUDGET_MS, SLICE_READS, type SliceState } from './slices.js';
import { mappedVerdict, rejectionVerdict } from './verdict.js';

export type { IntakeFence } from './fence.js';

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

/** What intake needs of back-pressure (src/buffer/back-pressure.ts): the quota and full-disk gate of its admission. */
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
  /** The items as submitted, mapped into `records` when the submit (or its slice) is taken. */
  items: IntakeItem[];
  /** The mapping of when it was submitted (a reload in between does not change it). */
  mapping: MappingContext;
  /** The input of its first item: submits of one input are taken in the order submitted. */
  inputId: string | undefined;
  records: IntakeRecord[];
  /** Scans among `records`, and their bytes (what the quota counts). */
  scans: number;
  scanBytes: number;
  file?: { inputId: string; hash: string; name?: string };
  message?: CommittedMessage & { dup: boolean };
  chunk?: FileChunk;
  taken: TakenReference[];
  resolve: (result: SubmitResult) => void;
  reject: (err: unknown) => void;
  /** A submit taken in slices (`inSlices`): each slice is committed as a submit of its own. */
  slices?: SliceState;
}

export interface IntakeOptions {
  /** The buffer; opened before {@link Intake.open}. */
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
   * High availability: reads are committed only while this node leads within its lease, stored
   * with its epoch, and a message the broker sent again (DUP) is stored as a possible duplicate
   * (the previous leader may have committed it). Without it (no `ha`) every commit is attempted.
   */
  fence?: IntakeFence;
  /**
   * Cuts known secrets out of a reason before it is stored (a refusal may quote the input, and
   * the input may hold a secret). The raw read is kept as received: it is the evidence.
   */
  scrub?: (text: string) => string;
}

/**
 * The sink every input hands its reads to, between the mapping and the buffer on a read's path
 * (input → mapping → intake → buffer): maps each read, checks it against the duplicate window
 * (duplicates.ts), then commits groups of submits in one SQLite transaction (group commit), and
 * resolves each submit only after its transaction committed, which is when the input may
 * acknowledge to its source.
 *
 * The constructor does no I/O; {@link open} (the buffer open) rebuilds the duplicate window and
 * lets submits in.
 */
export class Intake implements IntakeSink {
  private readonly dedupe: IntakeDuplicates;
  /** The buffer's intake side, from {@link open}. */
  private opened: IntakeWrites | undefined;
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** The checkpoint after a commit, run once the commit's sources were acknowledged. */
  private checkpoint: NodeJS.Immediate | undefined;
  private readonly counters = new Map<string, Counters>();
  private readonly now: Clock;
  private closed = false;
  private mapping: MappingContext;
  lastCommitError: { message: string; at: string } | undefined;

  private readonly scrub: (text: string) => string;
  /** Rule attributes not sent, per record, counted when the record is committed. */
  private readonly notSent = new WeakMap<IntakeRecord, number>();
  /** Input and attribute of the "attribute not sent" lines already logged (once each). */
  private readonly loggedNotSent = new Set<string>();
  /** Each record's verdict for its source (src/intake/verdict.ts), handed back with the outcomes. */
  private readonly verdicts = new WeakMap<IntakeRecord, Verdict>();

  /** Only keeps its options: {@link open} reads the buffer. */
  constructor(private readonly options: IntakeOptions) {
    this.now = options.now ?? Date.now;
    this.scrub = options.scrub ?? ((text) => text);
    this.mapping = options.mapping;
    this.dedupe = new IntakeDuplicates(options.logger, this.now);
  }

  /**
   * Takes the buffer's intake side (`options.store` must be open) and rebuilds the duplicate
   * window from the scans committed within it ({@link IntakeDuplicates.rebuild}), so a read
   * repeated across a restart is still a duplicate. Submits are refused until this ran. Answers
   * how many references the window took; a second call does nothing and answers 0.
   *
   * @throws GatewayError `SCANGW_E_NOT_RUNNING` when the buffer is not open; the SQLite error
   *   when its scans cannot be read.
   */
  open(): number {
    if (this.opened) return 0;
    const writes = this.options.store.intake;
    const restored = this.dedupe.rebuild(writes, this.mapping);
    this.opened = writes;
    return restored;
  }

  /** The buffer's intake side. @throws GatewayError `SCANGW_E_NOT_RUNNING` before {@link open}. */
  private get writes(): IntakeWrites {
    if (!this.opened)
      throw new GatewayError(ErrorCodes.NOT_RUNNING, 'intake is not open yet', { retryable: true });
    return this.opened;
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
   * larger than the quota and will never be taken. `SCANGW_E_NOT_RUNNING` before {@link open} and
   * once intake is closed.
   */
  submit(items: IntakeItem[], options: SubmitOptions = {}): Promise<SubmitResult> {
    if (this.closed)
      return Promise.reject(
        new GatewayError(ErrorCodes.NOT_RUNNING, 'intake is closed', { retryable: true }),
      );
    if (!this.opened)
      return Promise.reject(
        new GatewayError(ErrorCodes.NOT_RUNNING, 'intake is not open yet', { retryable: true }),
      );
    const first = items[0];
    const inputId =
      first === undefined
        ? undefined
        : first.kind === 'read'
          ? first.read.inputId
          : first.rejection.inputId;
    const pending: Pending = {
      items,
      mapping: this.mapping,
      inputId,
      records: [],
      scans: 0,
      scanBytes: 0,
      taken: [],
      resolve: () => {},
      reject: () => {},
    };
    if (options.fileHash !== undefined && inputId !== undefined) {
      pending.file = {
        inputId,
        hash: options.fileHash,
        ...(options.fileName !== undefined ? { name: options.fileName } : {}),
      };
    }
    if (options.message !== undefined && inputId !== undefined)
      pending.message = { inputId, ...options.message };
    if (options.fileChunk) pending.chunk = options.fileChunk;
    const whole = pending.file ?? pending.message ?? pending.chunk;
    if (options.inSlices && !whole && items.length > SLICE_READS)
      pending.slices = { next: 0, committed: 0, outcomes: [], settled: false };
    const done = new Promise<SubmitResult>((resolve, reject) => {
      pending.resolve = resolve;
      pending.reject = reject;
    });
    this.queue.push(pending);
    if (this.timer === undefined) {
      const windowMs = this.options.groupWindowMs ?? 0;
      this.timer =
        windowMs > 0 ? setTimeout(() => this.flush(), windowMs) : setImmediate(() => this.flush());
    }
    return done;
  }

  /** How far a file with this content is committed: complete (in `files`), or items of a file in progress. */
  fileProgress(inputId: string, hash: string): FileProgress | undefined {
    const writes = this.writes;
    if (writes.knownFile(inputId, hash)) return { items: 0, complete: true };
    const items = writes.fileProgress(inputId, hash);
    return items === undefined ? undefined : { items, complete: false };
  }

  /** A chunk committed before (by the file's progress, or the whole file): acknowledged, not stored again. */
  private chunkCommittedBefore(p: Pending): boolean {
    const c = p.chunk;
    if (!c) return false;
    const writes = this.writes;
    if (c.remember && writes.knownFile(c.inputId, c.hash)) return true;
    return (
      p.records.length > 0 &&
      (writes.fileProgress(c.inputId, c.hash) ?? 0) >= c.itemsBefore + p.records.length
    );
  }

  private toRecord(item: IntakeItem, pending: Pending, mapping: MappingContext): IntakeRecord {
    if (item.kind === 'rejection') {
      const r = item.rejection;
      const rejected: IntakeRecord = {
        inputId: r.inputId,
        receivedAt: r.receivedAt,
        raw: r.raw,
        outcome: 'rejected',
        reason: this.scrub(r.reason),
        inputLevel: true,
        ...(r.origin ? { origin: r.origin } : {}),
      };
      this.verdicts.set(rejected, rejectionVerdict(r.code));
      return rejected;
    }
    const read = item.read;
    // One object per read, filled in place: this runs for every read (no spread copies).
    const record: IntakeRecord = {
      inputId: read.inputId,
      receivedAt: read.receivedAt,
      raw: read.raw,
      outcome: 'scan',
    };
    if (read.sourceTime !== undefined) record.sourceTime = read.sourceTime;
    if (read.dcpKey !== undefined) record.dcpKey = read.dcpKey;
    if (read.parents && read.parents.length > 0) record.parents = read.parents;
    if (read.attributes) record.attributes = read.attributes;
    if (read.origin) record.origin = read.origin;
    const result = mapRead(read, mapping);
    if (result.changes) record.containers = result.changes;
    this.verdicts.set(record, mappedVerdict(result));
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
    const window = mapping.dcps.get(scan.dcpKey)?.duplicateWindowMs ?? 0;
    const duplicate = this.dedupe.check(scan.dcpKey, scan.reference, instant.getTime(), window);
    if (duplicate) {
      record.outcome = 'duplicate';
      record.reason = `same reference at ${scan.dcpKey} within ${window} ms`;
      this.verdicts.set(record, { verdict: 'nak', code: 'duplicate', reference: scan.reference });
      return record;
    }
    if (window > 0)
      pending.taken.push({
        dcpKey: scan.dcpKey,
        reference: scan.reference,
        atMs: instant.getTime(),
      });
    // A flagged time stamp (timeCheck) and the rule's attributes not sent are kept as the read's
    // reason (trace shows it as a note); the scan is sent all the same.
    const notes = [...(result.timeWarning ? [result.timeWarning] : []), ...(result.notes ?? [])];
    if (notes.length > 0) record.reason = this.scrub(notes.join('; '));
    if (result.notes) this.noteNotSent(read.inputId, result.rule, result.notes, record);
    const body = JSON.stringify(scan);
    const bytes = Buffer.byteLength(body);
    pending.scans++;
    pending.scanBytes += bytes;
    // The mapping parsed the read already: its elements spare the buffer a second parse.
    record.scan = {
      reference: scan.reference,
      dcpKey: scan.dcpKey,
      instant,
      body,
      bytes,
      gs1: result.barcode.kind === 'gs1' ? result.barcode.elements : [],
    };
    return record;
  }

  private cancelTimer(): void {
    const t = this.timer;
    if (t === undefined) return;
    if ('refresh' in t) clearTimeout(t);
    else clearImmediate(t);
    this.timer = undefined;
  }

  /**
   * Commits the group {@link take} makes of the queue, in four steps: {@link fenced} (this node
   * may not take reads now), {@link refuse} (the disk is full: every submit refused), {@link admit}
   * (each submit acknowledged as committed before, refused by the quota, or admitted) and
   * {@link commit} (one transaction for the admitted). What the group left in the queue (the rest
   * of a submit taken in slices, and what waits behind it) is taken in the next turn, after the
   * event loop served the I/O that came meanwhile.
   */
  private flush(): void {
    this.timer = undefined;
    const { group: queued, rest } = this.take();
    this.queue = rest;
    if (rest.length > 0) this.timer = setImmediate(() => this.flush());
    if (queued.length === 0) return;
    if (!this.fenced(queued) && !this.refuse(queued)) {
      const group = this.admit(queued);
      if (group.length > 0) this.commit(group);
    }
    // A slice refused settles its whole submit: the rest of it is not taken.
    if (this.queue.some((p) => p.slices?.settled))
      this.queue = this.queue.filter((p) => !p.slices?.settled);
  }

  /**
   * The next group, in the order submitted, and what stays queued: every submit taken whole,
   * mapped now; of the submits taken in slices ({@link SLICE_READS} reads and
   * {@link SLICE_MAP_BUDGET_MS} of mapping per turn between them) the next slice. A submit waits
   * while an earlier one of its input is not taken to its end, so one source's reads are mapped,
   * checked against the duplicate window and committed in the order it sent them; another input's
   * submit goes into the next commit, between two slices.
   */
  private take(): { group: Pending[]; rest: Pending[] } {
    const group: Pending[] = [];
    const rest: Pending[] = [];
    /** Inputs with a sliced submit not yet taken to its end: their later submits wait. */
    const behind = new Set<string | undefined>();
    let budget = SLICE_READS;
    const deadline = performance.now() + SLICE_MAP_BUDGET_MS;
    for (const p of this.queue) {
      if (behind.has(p.inputId)) {
        rest.push(p);
        continue;
      }
      const s = p.slices;
      if (!s) {
        for (const item of p.items) p.records.push(this.toRecord(item, p, p.mapping));
        p.items = [];
        group.push(p);
        continue;
      }
      if (budget > 0 && !s.settled) {
        const part = this.slice(p, s, budget, deadline);
        budget -= part.records.length;
        group.push(part);
      }
      if (s.next < p.items.length) {
        rest.push(p);
        behind.add(p.inputId);
      }
    }
    return { group, rest };
  }

  /**
   * Maps the next slice of a submit taken in slices (at most `budget` reads, at least one, until
   * `deadline` on the monotonic clock) into a submit of its own: committed or refused with the
   * group like any other, its outcomes added to the whole submit's, which resolves with its last
   * slice; a refusal rejects the whole submit, with the items committed before ({@link refusalAfter}).
   */
  private slice(whole: Pending, s: SliceState, budget: number, deadline: number): Pending {
    const part: Pending = {
      items: [],
      mapping: whole.mapping,
      inputId: whole.inputId,
      records: [],
      scans: 0,
      scanBytes: 0,
      taken: [],
      resolve: (result) => {
        s.committed += part.records.length;
        for (const o of result.outcomes) s.outcomes.push(o);
        if (s.committed < whole.items.length) return;
        s.settled = true;
        whole.resolve({ outcomes: s.outcomes });
      },
      reject: (err) => {
        s.settled = true;
        whole.reject(refusalAfter(err, s.committed));
      },
    };
    const end = Math.min(whole.items.length, s.next + budget);
    while (s.next < end) {
      const item = whole.items[s.next++] as IntakeItem;
      part.records.push(this.toRecord(item, part, whole.mapping));
      if (performance.now() >= deadline) break;
    }
    return part;
  }

  /**
   * High availability: when this node may not take reads now (a standby, or a leader past its
   * lease's renewal deadline, e.g. resumed after a stop), rejects every submit of the group with
   * `SCANGW_E_HA_NOT_LEADER` (retryable) and answers true: nothing committed, nothing
   * acknowledged, so the source sends it again to the leader. Checked in the same synchronous turn
   * as the commit, on the monotonic clock.
   */
  private fenced(queued: readonly Pending[]): boolean {
    const why = this.options.fence?.mayTake();
    if (why === undefined) return false;
    const refusal = new GatewayError(ErrorCodes.HA_NOT_LEADER, why, { retryable: true });
    for (const p of queued) {
      this.dedupe.forget(p.taken);
      p.reject(refusal);
    }
    this.options.logger.warn(
      { submits: queued.length, reason: why },
      'reads refused: this node may not take reads now; not acknowledged, the source sends them again',
    );
    return true;
  }

  /**
   * While the gate refuses every write (the disk is full), rejects every submit of the group with
   * `SCANGW_E_BUFFER_DISK_FULL` (retryable) and answers true: nothing written, the sources keep
   * their reads and retry; the room is delivery's.
   */
  private refuse(queued: readonly Pending[]): boolean {
    const full = this.options.gate?.writesRefused?.();
    if (full === undefined) return false;
    const refusal = new GatewayError(ErrorCodes.BUFFER_DISK_FULL, full, { retryable: true });
    for (const p of queued) {
      this.dedupe.forget(p.taken);
      p.reject(refusal);
    }
    return true;
  }

  /**
   * Settles what needs no commit and answers the submits to commit, in order: a message or file
   * (or a file's chunk) committed before is acknowledged only; a submit the quota can never take
   * is rejected `SCANGW_E_BUFFER_TOO_LARGE`, one it cannot take now `SCANGW_E_BUFFER_QUOTA`, each
   * admitted against the scans of those admitted before it in the group.
   */
  private admit(queued: readonly Pending[]): Pending[] {
    const { gate, logger } = this.options;
    const writes = this.writes;
    const group: Pending[] = [];
    let scans = 0;
    let bytes = 0;
    gate?.beginGroup?.();
    for (const p of queued) {
      if (p.message?.dup && writes.knownMessage(p.message)) {
        // The broker's resend of a message committed before whose PUBACK it never had: acknowledge only.
        this.dedupe.forget(p.taken);
        const counters = this.countersOf(p.message.inputId);
        if (counters) counters.redelivered++;
        p.resolve({ outcomes: [], redelivered: true });
        continue;
      }
      if (p.file && writes.knownFile(p.file.inputId, p.file.hash)) {
        // Committed before (a crash came between the commit and the file's move): acknowledge only.
        this.dedupe.forget(p.taken);
        logger.warn(
          { inputId: p.file.inputId, file: p.file.name, hash: p.file.hash },
          'file with this content was stored before; not stored again',
        );
        p.resolve(this.outcomesOf(p));
        continue;
      }
      if (this.chunkCommittedBefore(p)) {
        this.dedupe.forget(p.taken);
        logger.warn(
          { inputId: p.chunk?.inputId, file: p.chunk?.name, hash: p.chunk?.hash },
          'chunk of a file was stored before; not stored again',
        );
        p.resolve(this.outcomesOf(p));
        continue;
      }
      const adds = p.scans;
      const addBytes = p.scanBytes;
      const never = adds > 0 ? gate?.tooLarge?.(adds, addBytes) : undefined;
      if (never !== undefined) {
        this.dedupe.forget(p.taken);
        p.reject(new GatewayError(ErrorCodes.BUFFER_TOO_LARGE, never, { retryable: false }));
        continue;
      }
      const refused = adds > 0 ? gate?.admit(scans + adds, bytes + addBytes) : undefined;
      if (refused !== undefined) {
        this.dedupe.forget(p.taken);
        p.reject(new GatewayError(ErrorCodes.BUFFER_QUOTA, refused, { retryable: true }));
        continue;
      }
      scans += adds;
      bytes += addBytes;
      group.push(p);
    }
    return group;
  }

  /**
   * Commits the admitted submits in one transaction and settles them: resolved once committed
   * (the checkpoint after it queued behind their acknowledgements), or rejected
   * `SCANGW_E_BUFFER_DISK_FULL` / `SCANGW_E_BUFFER` (retryable) with nothing written.
   */
  private commit(group: readonly Pending[]): void {
    const { gate, logger } = this.options;
    const writes = this.writes;
    const records = group.flatMap((p) => p.records);
    const files = group.flatMap((p): CommittedFile[] => {
      if (p.file) return [{ ...p.file, items: p.records.length }];
      const c = p.chunk;
      if (!c) return [];
      return [
        {
          inputId: c.inputId,
          hash: c.hash,
          name: c.name,
          items: c.itemsBefore + p.records.length,
          inProgress: !c.final,
          remember: c.remember,
        },
      ];
    });
    const messages = group.flatMap((p) => (p.message ? [p.message] : []));
    const fence = this.options.fence;
    if (fence) {
      // The broker's resend after a takeover: the dead leader may have committed it before it
      // could acknowledge (at most its in-flight window), and its identity is in that node's buffer.
      for (const p of group)
        if (p.message?.dup) for (const r of p.records) r.possibleDuplicate = true;
    }
    try {
      writes.commitIntake(records, this.now(), files, messages, fence?.epoch());
    } catch (err) {
      // Nothing was written: forget the references taken so the source's retry is not a duplicate.
      for (const p of group) this.dedupe.forget(p.taken);
      const diskFull = isDiskFull(err);
      this.lastCommitError = {
        message: (err as Error).message,
        at: new Date(this.now()).toISOString(),
      };
      gate?.commitFailed(err);
      fence?.commitFailed(err);
      logger.error(
        { err, reads: records.length, diskFull },
        'commit of reads failed; sources are not acknowledged',
      );
      const refusal = new GatewayError(
        diskFull ? ErrorCodes.BUFFER_DISK_FULL : ErrorCodes.BUFFER,
        diskFull
          ? `the buffer's disk is full: ${(err as Error).message}`
          : `commit of reads failed: ${(err as Error).message}`,
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
      writes.checkpointAfterCommit();
    });
    gate?.commitSucceeded();
    for (const r of records) this.countCommitted(r);
    for (const p of group) p.resolve(this.outcomesOf(p));
    if (records.some((r) => r.outcome === 'scan')) this.options.onScansCommitted?.();
  }

  /** Commits whatever is queued now (every slice at once); after this, submits are refused. */
  close(): void {
    this.cancelTimer();
    // Each flush takes at least the first submit queued (or a slice of it): this ends.
    while (this.queue.length > 0) {
      this.flush();
      this.cancelTimer();
    }
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
    const removed = this.writes.forgetMessages(inputId);
    if (removed > 0)
      this.options.logger.info(
        { inputId, removed },
        'broker holds no session for this input: its message identities are forgotten',
      );
  }

  /** The input's counters; undefined for an input no longer configured once {@link MAX_COUNTED_INPUTS} are counted. */
  private countersOf(inputId: string): Counters | undefined {
    let c = this.counters.get(inputId);
    if (!c) {
      if (this.counters.size >= MAX_COUNTED_INPUTS && !this.mapping.inputs.has(inputId))
        return undefined;
      c = emptyCounters();
      this.counters.set(inputId, c);
    }
    return c;
  }

  /** Counts the rule attributes a read did not get, and logs each input's attribute once. */
  private noteNotSent(
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
      this.options.logger.warn(
        { inputId, rule, note: this.scrub(note) },
        'a rule attribute had no value and was not sent (logged once per input and attribute; each read keeps the note)',
      );
    }
  }

  /** What each item of a submit became, with its verdict for the source, in the items' order. */
  private outcomesOf(p: Pending): SubmitResult {
    return {
      outcomes: p.records.map((r): ItemOutcome => ({
        outcome: r.outcome,
        ...(r.reason !== undefined ? { reason: r.reason } : {}),
        ...this.verdicts.get(r),
      })),
    };
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
    if (r.outcome === 'scan') {
      c.scans++;
      const notSent = this.notSent.get(r);
      if (notSent !== undefined) c.attributesNotSent = (c.attributesNotSent ?? 0) + notSent;
    } else if (r.outcome === 'noRead') c.noReads++;
    else if (r.outcome === 'duplicate') c.duplicates++;
    else c.rejections++;
  }
}

/** A record's verdict for its source. */
type Verdict = Pick<ItemOutcome, 'verdict' | 'code' | 'reference'>;

/** The counters as kept: the time of the last read as received, formatted by {@link Intake.countersFor}. */
type Counters = Omit<InputCounters, 'lastReadAt'> & { lastReadAtDate?: Date };

function emptyCounters(): Counters {
  return { reads: 0, scans: 0, noReads: 0, rejections: 0, duplicates: 0, redelivered: 0, bytes: 0 };
}
