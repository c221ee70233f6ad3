import { ErrorCodes, GatewayError, isDiskFull } from '../errors.js';
import type { FileChunk, FileProgress, FileRecord, FileSink } from '../inputs/files/file-sink.js';
import type { MessageSink, MessageSubmitResult, MqttMessage } from '../inputs/mqtt/message-sink.js';
import type { IntakeItem, SubmitOptions, SubmitResult } from '../inputs/types.js';
import type { MappingContext } from '../mapping/map-read.js';
import type { IntakeWrites } from '../buffer/intake-writes.js';
import type { IntakeRecord } from '../buffer/store.js';
import type { Clock } from '../clock.js';
import { IntakeCounters, type InputCounters } from './counters.js';
import { IntakeDuplicates } from './duplicates.js';
import { takeGroup } from './groups.js';
import { INTAKE_WRITER_WAIT_MS, type IntakeOptions } from './options.js';
import {
  chunkReceipt,
  committedFiles,
  committedMessages,
  fileProgressIn,
  fileReceipt,
  inputIdOf,
  messageReceipt,
  settledBefore,
  type Receipt,
} from './receipts.js';
import { outcomesOf, toRecord, type Pending, type Verdict } from './records.js';
import { SLICE_READS } from './slices.js';

export type { IntakeFence } from './fence.js';
export { MAX_COUNTED_INPUTS, type InputCounters } from './counters.js';
export type { IntakeGate, IntakeOptions } from './options.js';

/**
 * The sink every input hands its reads to, between the mapping and the buffer on a read's path
 * (input → mapping → intake → buffer): maps each read, checks it against the duplicate window
 * (duplicates.ts), then commits groups of submits in one SQLite transaction (group commit), and
 * resolves each submit only after its transaction committed, which is when the input may
 * acknowledge to its source. The files and MQTT inputs' receipts (a file's hash or progress, a
 * message's identity) are committed in the same transaction as their items (receipts.ts).
 *
 * The constructor does no I/O; {@link open} (the buffer open) rebuilds the duplicate window and
 * lets submits in.
 */
export class Intake implements FileSink, MessageSink {
  private readonly dedupe: IntakeDuplicates;
  /** The buffer's intake side, from {@link open}. */
  private opened: IntakeWrites | undefined;
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** The checkpoint after a commit, run once the commit's sources were acknowledged. */
  private checkpoint: NodeJS.Immediate | undefined;
  private readonly counters: IntakeCounters;
  private readonly now: Clock;
  private closed = false;
  private mapping: MappingContext;
  lastCommitError: { message: string; at: string } | undefined;

  private readonly scrub: (text: string) => string;
  /** Each record's verdict for its source (src/intake/verdict.ts), handed back with the outcomes. */
  private readonly verdicts = new WeakMap<IntakeRecord, Verdict>();

  /** Only keeps its options: {@link open} reads the buffer. */
  constructor(private readonly options: IntakeOptions) {
    this.now = options.now ?? Date.now;
    this.scrub = options.scrub ?? ((text) => text);
    this.mapping = options.mapping;
    this.dedupe = new IntakeDuplicates(options.logger, this.now);
    this.counters = new IntakeCounters(options.logger, () => this.mapping, this.scrub);
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
    this.counters.keepOnly(mapping);
  }

  /** Inputs with counters held now (bounded by `MAX_COUNTED_INPUTS`). */
  countedInputs(): number {
    return this.counters.size();
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
    return this.enqueue(items, {}, options.inSlices === true);
  }

  /** {@link FileSink.submitFile}: as {@link submit}, with the file's hash; never in slices. */
  submitFile(items: IntakeItem[], file: FileRecord): Promise<SubmitResult> {
    return this.enqueue(items, fileReceipt(items, file), false);
  }

  /** {@link FileSink.submitChunk}: as {@link submit}, with the file's progress; never in slices. */
  submitChunk(items: IntakeItem[], chunk: FileChunk): Promise<SubmitResult> {
    return this.enqueue(items, chunkReceipt(chunk), false);
  }

  /** {@link MessageSink.submitMessage}: as {@link submit}, with the message's identity. */
  submitMessage(items: IntakeItem[], message: MqttMessage): Promise<MessageSubmitResult> {
    return this.enqueue(items, messageReceipt(items, message), false);
  }

  /** Queues a submit with its receipt, taken in slices when asked and it has more than a slice. */
  private enqueue(
    items: IntakeItem[],
    receipt: Receipt,
    inSlices: boolean,
  ): Promise<MessageSubmitResult> {
    if (this.closed)
      return Promise.reject(
        new GatewayError(ErrorCodes.NOT_RUNNING, 'intake is closed', { retryable: true }),
      );
    if (!this.opened)
      return Promise.reject(
        new GatewayError(ErrorCodes.NOT_RUNNING, 'intake is not open yet', { retryable: true }),
      );
    const pending: Pending = {
      items,
      mapping: this.mapping,
      inputId: inputIdOf(items),
      records: [],
      scans: 0,
      scanBytes: 0,
      taken: [],
      resolve: () => {},
      reject: () => {},
      ...receipt,
    };
    // A receipt's items are committed in one transaction with it.
    const whole = pending.file ?? pending.message ?? pending.chunk;
    if (inSlices && !whole && items.length > SLICE_READS)
      pending.slices = { next: 0, committed: 0, outcomes: [], settled: false };
    const done = new Promise<MessageSubmitResult>((resolve, reject) => {
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

  /** {@link FileSink.fileProgress}. @throws GatewayError `SCANGW_E_NOT_RUNNING` before {@link open}. */
  fileProgress(inputId: string, hash: string): FileProgress | undefined {
    return fileProgressIn(this.writes, inputId, hash);
  }

  private toRecord(item: IntakeItem, pending: Pending, mapping: MappingContext): IntakeRecord {
    return toRecord(item, pending, mapping, {
      scrub: this.scrub,
      verdicts: this.verdicts,
      dedupe: this.dedupe,
      noteNotSent: (inputId, rule, notes, record) =>
        this.counters.noteNotSent(inputId, rule, notes, record),
    });
  }

  private cancelTimer(): void {
    const t = this.timer;
    if (t === undefined) return;
    if ('refresh' in t) clearTimeout(t);
    else clearImmediate(t);
    this.timer = undefined;
  }

  /**
   * Commits the group {@link takeGroup} makes of the queue, in four steps: {@link fenced} (this node
   * may not take reads now), {@link refuse} (the disk is full: every submit refused), {@link admit}
   * (each submit acknowledged as committed before, refused by the quota, or admitted) and
   * {@link commit} (one transaction for the admitted). What the group left in the queue (the rest
   * of a submit taken in slices, and what waits behind it) is taken in the next turn, after the
   * event loop served the I/O that came meanwhile.
   */
  private flush(mayWait = true): void {
    this.timer = undefined;
    if (mayWait && this.waitForOtherWriter()) return;
    const { group: queued, rest } = takeGroup(this.queue, (item, p, mapping) =>
      this.toRecord(item, p, mapping),
    );
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
   * When another connection is writing the buffer ({@link IntakeOptions.otherWriter}): flushes
   * once that write ends, or after {@link IntakeOptions.otherWriterWaitMs}, without waiting
   * again, and answers true. The flush runs in the reaction to the end of the write, before the
   * other writer can begin its next transaction.
   */
  private waitForOtherWriter(): boolean {
    const writing = this.options.otherWriter?.();
    if (writing === undefined) return false;
    const go = (): void => {
      if (this.timer !== bound) return;
      clearTimeout(bound);
      this.flush(false);
    };
    const bound = setTimeout(go, this.options.otherWriterWaitMs ?? INTAKE_WRITER_WAIT_MS);
    this.timer = bound;
    void writing.then(go);
    return true;
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
    const settle = {
      writes: this.writes,
      logger,
      verdicts: this.verdicts,
      forget: (taken: Pending['taken']) => this.dedupe.forget(taken),
      countRedelivered: (inputId: string) => this.counters.countRedelivered(inputId),
    };
    const group: Pending[] = [];
    let scans = 0;
    let bytes = 0;
    gate?.beginGroup?.();
    for (const p of queued) {
      if (settledBefore(p, settle)) continue;
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
    const files = committedFiles(group);
    const messages = committedMessages(group);
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
    for (const r of records) this.counters.countCommitted(r);
    for (const p of group) p.resolve(outcomesOf(p, this.verdicts));
    if (records.some((r) => r.outcome === 'scan')) this.options.onScansCommitted?.();
  }

  /** Commits whatever is queued now (every slice at once); after this, submits are refused. */
  close(): void {
    this.cancelTimer();
    // Each flush takes at least the first submit queued (or a slice of it): this ends.
    while (this.queue.length > 0) {
      this.flush(false);
      this.cancelTimer();
    }
    clearImmediate(this.checkpoint);
    this.checkpoint = undefined;
    this.closed = true;
  }

  /** Per-input counters since the gateway started ({@link InputCounters}). */
  countersFor(inputId: string): InputCounters {
    return this.counters.countersFor(inputId);
  }

  /** {@link MessageSink.forgetMessages}. @throws GatewayError `SCANGW_E_NOT_RUNNING` before {@link open}. */
  forgetMessages(inputId: string): void {
    const removed = this.writes.forgetMessages(inputId);
    if (removed > 0)
      this.options.logger.info(
        { inputId, removed },
        'broker holds no session for this input: its message identities are forgotten',
      );
  }
}
