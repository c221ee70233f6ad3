import type { DeliveryConfig } from '../config/schema.js';
import type { Logger } from '../log.js';
import {
  arrayBytes,
  type BatchMode,
  type BatchRow,
  type BufferStore,
  type PendingScanRow,
} from '../buffer/store.js';
import { MAX_DIRECT_BODY_BYTES } from '@scan-gateway/contract';
import type { Clock } from '../clock.js';
import { BatchThreadUnavailable, type BatchThread } from './batch-thread.js';

/** Rows {@link packScans} looks at beyond `maxScans` to get past scans it must skip (repeated references). */
export const BATCH_LOOKAHEAD = 10_000;

/**
 * Batches of at most this many scans are formed from the SQL sums of the queue head when it can go
 * whole ({@link formBatch}). Counting the head's distinct references builds a temporary index in
 * SQLite, kept in the connection's page cache (better-sqlite3's default, 16 MiB) and spilled to a
 * temporary file beyond it, which a full disk refuses. 20,000 references take at most a few MiB
 * (none spilled with 500,000 of the benchmark's short ones, checked with strace); an SFTP batch
 * (500,000 scans by default) of long references could spill, so batches above this are packed
 * from the rows as before, in the process's own memory.
 */
export const HEAD_SUMS_MAX_SCANS = 20_000;

/** What {@link packScans} chose: the scans of the batch, its array's bytes, and the scans too large alone. */
export interface PackedBatch {
  /** Scan ids, in id order. */
  ids: number[];
  /** Bytes of the JSON array of these scans (`arrayBytes`). */
  bytes: number;
  /** Sum of the scans' stored JSON lengths (`bytes` less the brackets and commas). */
  scanBytes: number;
  /**
   * True when no row between the first and the last id taken was left out (no reference repeated,
   * no scan too large in between): the batch is then every pending scan in that id range.
   */
  gapless: boolean;
  /** Scans whose array alone is over `maxBytes`: never sendable under this limit. */
  oversize: { id: number; bytes: number }[];
}

/**
 * The packing rule: takes the oldest pending scans (in id order) into a batch of at most
 * `maxScans` scans whose JSON array is at most `maxBytes` bytes, never two scans with the same
 * reference (so each failure in a status answer maps to exactly one scan). Packing is incremental:
 * each scan adds its stored byte length and a comma. A scan whose reference is already in the
 * batch is skipped and waits for the next batch; at most `maxScans + BATCH_LOOKAHEAD` rows are
 * looked at, so a backlog where one reference repeats thousands of times still drains (one of them
 * per batch) at bounded cost. Stops reading `rows` as soon as the batch is full (a cursor is closed).
 *
 * Pure: no I/O beyond pulling `rows`.
 */
export function packScans(
  rows: Iterable<PendingScanRow>,
  opts: { maxScans: number; maxBytes: number },
): PackedBatch {
  const ids: number[] = [];
  const oversize: { id: number; bytes: number }[] = [];
  const references = new Set<string>();
  let sum = 0;
  let examined = 0;
  let skipped = false;
  let gapless = true;
  for (const row of rows) {
    if (++examined > opts.maxScans + BATCH_LOOKAHEAD) break;
    if (references.has(row.reference)) {
      skipped = true;
      continue;
    }
    if (arrayBytes(1, row.bytes) > opts.maxBytes) {
      oversize.push({ id: row.id, bytes: row.bytes });
      skipped = true;
      continue;
    }
    if (arrayBytes(ids.length + 1, sum + row.bytes) > opts.maxBytes) break;
    // A row left out before this one is a gap, unless nothing was taken yet.
    if (skipped && ids.length > 0) gapless = false;
    skipped = false;
    ids.push(row.id);
    references.add(row.reference);
    sum += row.bytes;
    if (ids.length >= opts.maxScans) break;
  }
  return { ids, bytes: arrayBytes(ids.length, sum), scanBytes: sum, gapless, oversize };
}

/** How {@link formBatch} forms one batch: its mode, its limits, its time stamp. */
export interface FormOptions {
  /** At most this many scans. */
  maxScans: number;
  /** The batch's JSON array at most this many bytes. */
  maxBytes: number;
  mode: BatchMode;
  /** The batch's `created_at`. */
  nowIso: string;
  /** Hold a scan too large alone for `maxBytes`, with the reason (else it stays pending). */
  holdOversize?: boolean;
}

/**
 * Packs the oldest pending scans of `store` into a new batch ({@link packScans}) and writes it, in
 * one transaction. A single scan larger than `maxBytes` can never be sent this way: with
 * `holdOversize` it is held with the reason (replay it after switching to pre-signed), otherwise it
 * is left pending.
 *
 * When the first `maxScans` pending scans repeat no reference and fit `maxBytes` together, packing
 * would take exactly them: the batch is then formed from their sums in SQL (`pendingHead`) and
 * moved by id range, without reading the rows out (cheaper when a backlog drains), for batches of
 * up to {@link HEAD_SUMS_MAX_SCANS} scans. Otherwise the rows are read and packed one by one.
 *
 * @returns the new batch, or undefined when nothing could be packed.
 */
export function formBatch(store: BufferStore, opts: FormOptions): BatchRow | undefined {
  return store.atomically(() => {
    const head =
      opts.maxScans <= HEAD_SUMS_MAX_SCANS ? store.batches.pendingHead(opts.maxScans) : undefined;
    if (
      head &&
      head.scans > 0 &&
      head.references === head.scans &&
      head.firstId !== null &&
      head.lastId !== null &&
      arrayBytes(head.scans, head.scanBytes) <= opts.maxBytes
    ) {
      return store.batches.writeBatch({
        mode: opts.mode,
        range: { first: head.firstId, last: head.lastId, count: head.scans },
        bytes: arrayBytes(head.scans, head.scanBytes),
        scanBytes: head.scanBytes,
        nowIso: opts.nowIso,
      });
    }
    const packed = packScans(store.batches.pendingScans(), opts);
    const hold = opts.holdOversize
      ? packed.oversize.map((o) => ({
          id: o.id,
          reason: `the scan alone is ${o.bytes + 2} bytes, over the ${opts.maxBytes}-byte limit of a ${opts.mode} upload`,
        }))
      : [];
    return store.batches.writeBatch({
      mode: opts.mode,
      scanIds: packed.ids,
      bytes: packed.bytes,
      scanBytes: packed.scanBytes,
      gapless: packed.gapless,
      nowIso: opts.nowIso,
      hold,
    });
  });
}

/**
 * Runs a write transaction in the writer's turn: the batch thread's `ThreadTurn` (write-turn.ts),
 * which lets the event loop's writers go first and keeps them out of SQLite's busy handler.
 */
export interface WriteHold {
  hold<T>(write: () => T): T;
}

/** On the store's own connection: no turn to take. */
const IN_PROCESS: WriteHold = { hold: (write) => write() };

/**
 * Forms one batch by the first of `attempts` that packs a scan ({@link formBatch} each, its own
 * transaction): the batch of the mode due, then, in auto mode, the large-batch route. The same
 * on the store's connection and in the batch thread. With `stepScans` (the batch thread), a
 * backlog's batch is written in steps of that many scans ({@link formInSteps}).
 *
 * @returns the new batch, or undefined when no attempt packed any scan.
 */
export function formFirst(
  store: BufferStore,
  attempts: readonly FormOptions[],
  turn: WriteHold = IN_PROCESS,
  stepScans?: number,
): BatchRow | undefined {
  for (const attempt of attempts) {
    const batch =
      (stepScans === undefined ? undefined : formInSteps(store, attempt, stepScans, turn)) ??
      turn.hold(() => formBatch(store, attempt));
    if (batch) return batch;
  }
  return undefined;
}

/**
 * Scans moved per step when the batch thread writes a backlog's batch in steps ({@link
 * formInSteps}, `Batches.growBatch`), each step its own transaction: the store connection's
 * writers (the line's reads) wait for one step, not for the whole batch. On a 1 M backlog, quiet:
 * a batch of 5,000 in one transaction holds the write lock for about 17 ms, a step of 1,000 for
 * about 4 ms. Measured alternately on the outage row's drain of 1 M: read-to-commit p99 28 to
 * 49 ms with steps of 1,000 (50 to 66 ms in one transaction, 44 and 54 ms with steps of 2,500); on
 * the 10 M row 37.3 ms against 98.7, for a drain 17 % slower: the thread's work per batch is the
 * larger, five commits and a plan (docs/performance.md, section 16).
 */
export const FORM_STEP_SCANS = 1000;

/**
 * `attempt`'s batch written in steps of `stepScans` scans ({@link formFirst} with `stepScans`):
 * when the head of the pending queue goes whole into the batch (as `formBatch` forms it from the
 * SQL sums: no reference repeated, within the byte limit) and holds more than one step, it is
 * planned in one snapshot without the write lock (`Batches.planSteps`), its first span written as
 * a batch of its own and each later span moved into it (`Batches.growBatch`), every step its own
 * transaction in `turn`, which lets the writers of the event loop's connection that wait go in
 * before the next step. A later span no longer as planned ends the batch there: the batch is
 * whole after each step.
 *
 * @returns the batch after its last step, or undefined when the head cannot go in steps (or
 *   changed between the plan and the first step): the caller then forms the batch whole.
 */
function formInSteps(
  store: BufferStore,
  attempt: FormOptions,
  stepScans: number,
  turn: WriteHold,
): BatchRow | undefined {
  if (attempt.maxScans > HEAD_SUMS_MAX_SCANS || attempt.maxScans <= stepScans) return undefined;
  const { head, spans } = store.batches.planSteps(attempt.maxScans, stepScans);
  const [first, ...rest] = spans;
  if (
    !first ||
    rest.length === 0 ||
    head.references !== head.scans ||
    arrayBytes(head.scans, head.scanBytes) > attempt.maxBytes
  )
    return undefined;
  let batch = turn.hold(() =>
    store.batches.growBatch(first, { mode: attempt.mode, nowIso: attempt.nowIso }),
  );
  if (!batch) return undefined;
  const batchId = batch.id;
  for (const span of rest) {
    const grown = turn.hold(() => store.batches.growBatch(span, batchId));
    if (!grown) break;
    batch = grown;
  }
  return batch;
}

/** Options of {@link Batcher}. */
export interface BatcherOptions {
  store: BufferStore;
  config: DeliveryConfig;
  logger: Logger;
  now: Clock;
  /**
   * Forms the batches of a backlog (pending scans that fill a batch) off the event loop, on a
   * connection of its own (batch-thread.ts). Without it, or while it is unavailable, every batch
   * is formed on the store's connection.
   */
  thread?: BatchThread;
  /** A batch formed in the thread was written (or the attempt ended): look for work now. */
  onFormed?: () => void;
  /** Scans per step of a batch written in steps in the thread; default {@link FORM_STEP_SCANS}. */
  formStepScans?: number;
}

/**
 * While a batch is being formed in the thread, how long {@link Batcher.formIfDue} tells its caller
 * to wait at most, ms: `onFormed` wakes it sooner, when the batch is written.
 */
export const FORMING_WAIT_MS = 1000;

/**
 * Forms batches from the outbox (docs/delivery.md, "Batches"): when pending scans fill a batch by
 * count (`maxBatchScans`) or by bytes (the 5.8 MiB direct limit), or the oldest has waited
 * `maxBatchDelayMs`. It runs no loop of its own: the uploader asks it when no batch waits to be
 * sent (one ahead of the free upload slots), so batches are formed one at a time, in id order.
 *
 * A batch due because the pending scans fill it (a backlog draining) is formed in the batch thread
 * when there is one: the uploader's loop goes on meanwhile and is woken (`onFormed`) once the
 * batch is written. A batch due by age, a few scans of a line that delivers as it scans, is formed
 * at once on the store's connection.
 */
export class Batcher {
  /** The batch being formed in the thread, until it is written or failed. */
  private forming: Promise<void> | undefined;
  /** While {@link forming}: the highest batch id before it was asked ({@link unfinished}). */
  private formFloor = 0;
  /** What the last form in the thread failed on (a full disk), thrown at the next {@link formIfDue}. */
  private formError: unknown;

  constructor(private readonly options: BatcherOptions) {}

  /**
   * Forms a batch if one is due. Answers 0 when a batch was formed (look again at once), the ms
   * until the oldest pending scan makes one due, {@link FORMING_WAIT_MS} while one is being formed
   * in the thread, or undefined when nothing is pending.
   *
   * @throws what forming threw (SQLite's error, a full disk), also for a batch formed in the thread
   *   (thrown at the next call, the buffer unchanged).
   */
  formIfDue(): number | undefined {
    if (this.formError !== undefined) {
      const err = this.formError;
      this.formError = undefined;
      throw err;
    }
    if (this.forming) return FORMING_WAIT_MS;
    const { store, config, now } = this.options;
    const pending = store.batches.pending();
    if (pending.count === 0) return undefined;
    const age = now() - (pending.oldestCreatedAt ?? now());
    const full =
      config.mode === 'sftp'
        ? pending.count >= config.sftpMaxScans ||
          store.reports.totals().pendingBytes >= config.sftpMaxBytes
        : pending.count >= config.maxBatchScans ||
          store.reports.totals().pendingBytes >= MAX_DIRECT_BODY_BYTES;
    if (full && this.options.thread?.usable) {
      this.formInThread(this.options.thread);
      return FORMING_WAIT_MS;
    }
    if (full || age >= config.maxBatchDelayMs) {
      this.form();
      return 0;
    }
    return config.maxBatchDelayMs - age;
  }

  /**
   * Whether batch `id` may not be whole yet: formed in the thread since the form now in flight was
   * asked. A backlog's batch written in steps is `ready` in the buffer from its first step on, and
   * the thread commits each step before its answer reaches the event loop, so every batch above
   * the highest id of before is unfinished until the form has ended. Not to be sent meanwhile.
   */
  unfinished(id: number): boolean {
    return this.forming !== undefined && id > this.formFloor;
  }

  /** Settles when no batch is being formed in the thread (the uploader's stop waits for it). */
  async settled(): Promise<void> {
    await this.forming;
  }

  /**
   * Forms the next batch. `auto` sends a backlog (more pending than one direct batch holds, by
   * count or bytes) by `largeBatchRoute` (pre-signed or SFTP) in larger batches, and anything
   * else direct. `sftp` sends every batch by SFTP, up to `sftpMaxScans` / `sftpMaxBytes`.
   */
  form(): BatchRow | undefined {
    const batch = formFirst(this.options.store, this.attempts());
    if (batch) this.formed(batch, false);
    return batch;
  }

  /** {@link form} in the thread; a thread that cannot do it leaves the batch to the next call. */
  private formInThread(thread: BatchThread): void {
    this.formFloor = this.options.store.batches.lastBatchId();
    this.forming = thread
      .form(this.attempts(), this.options.formStepScans ?? FORM_STEP_SCANS)
      .then(
        (batch) => {
          if (batch) this.formed(batch, true);
        },
        (err: unknown) => {
          // The thread is unusable for a while (it said so in the log): the next call forms the
          // batch on the store's connection. Anything else failed in SQLite, as it would here.
          if (!(err instanceof BatchThreadUnavailable)) this.formError = err;
        },
      )
      .finally(() => {
        this.forming = undefined;
        this.options.onFormed?.();
      });
  }

  /** What {@link form} tries, in order: the batch of the mode due, then, in auto mode, the large-batch route. */
  private attempts(): FormOptions[] {
    const { store, config, now } = this.options;
    const nowIso = new Date(now()).toISOString();
    const totals = store.reports.totals();
    const backlog =
      totals.pendingScans > config.maxBatchScans || totals.pendingBytes > MAX_DIRECT_BODY_BYTES;
    const large: BatchMode = config.largeBatchRoute;
    const mode: BatchMode = config.mode === 'auto' ? (backlog ? large : 'direct') : config.mode;
    const options = (m: BatchMode): FormOptions =>
      m === 'direct'
        ? {
            mode: m,
            maxScans: config.maxBatchScans,
            maxBytes: MAX_DIRECT_BODY_BYTES,
            nowIso,
            holdOversize: config.mode === 'direct',
          }
        : m === 'sftp'
          ? {
              mode: m,
              maxScans: config.sftpMaxScans,
              maxBytes: config.sftpMaxBytes,
              nowIso,
              holdOversize: true,
            }
          : {
              mode: m,
              maxScans: config.presignedMaxScans,
              maxBytes: config.presignedMaxBytes,
              nowIso,
              holdOversize: true,
            };
    // In auto mode a scan too large for a direct upload still goes, by the large-batch route.
    return config.mode === 'auto' && mode === 'direct'
      ? [options(mode), options(large)]
      : [options(mode)];
  }

  private formed(batch: BatchRow, inThread: boolean): void {
    this.options.logger.debug(
      {
        batchId: batch.id,
        mode: batch.mode,
        scans: batch.scanCount,
        bytes: batch.bytes,
        ...(inThread ? { thread: true } : {}),
      },
      'batch formed',
    );
  }
}
