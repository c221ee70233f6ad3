import type Database from 'better-sqlite3';
import { ErrorCodes, GatewayError } from '../errors.js';
import { prepareBatchStatements, type BatchStatements } from './batch-statements.js';
import {
  arrayBytes,
  BATCH_COLUMNS,
  type BatchMode,
  type BatchRow,
  type BatchState,
  type PendingHead,
  type PendingSpan,
  type PendingScanRow,
} from './rows.js';

/** Rows per page of {@link Batches.pendingScans}. */
export const PENDING_PAGE_ROWS = 2_000;

/** A terminal status as {@link Batches.finishBatch} records it (contract §2.8). */
export interface FinishedStatus {
  state: string;
  description?: string | undefined;
  processed?: number | undefined;
  failed?: number | undefined;
  failures?: { reference: string; reason: string }[] | undefined;
}

/**
 * Delivery's side of the buffer (src/delivery/): the pending scans it packs, the batches it forms,
 * sends and follows to their end (state, 413 split, hold, terminal status), their bodies, and the
 * SFTP lookups of a batch by its remote file or its references. Built by `BufferStore.open` on its
 * connection; statements of fixed text are prepared once, in batch-statements.ts; those whose text
 * depends on the call (the columns an update sets, the number of states asked for) here, once per
 * distinct text.
 */
export class Batches {
  private readonly s: BatchStatements;
  /** Statements whose text depends on the call, by their text. */
  private readonly byText = new Map<string, Database.Statement>();

  constructor(private readonly db: Database.Database) {
    this.s = prepareBatchStatements(db);
  }

  /** A statement whose text depends on the call, prepared at its first use and kept. */
  private statement(sql: string): Database.Statement {
    let st = this.byText.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.byText.set(sql, st);
    }
    return st;
  }

  /** Count of scans not yet in a batch (from the trigger-kept totals), and the `created_at` (ms) of the oldest. */
  pending(): { count: number; oldestCreatedAt: number | null } {
    const count = this.s.pendingCount.get() as number;
    return {
      count,
      oldestCreatedAt:
        count === 0 ? null : ((this.s.pendingOldest.get() as number | null | undefined) ?? null),
    };
  }

  /**
   * Pending scans (not yet in a batch) in id order, read in pages of {@link PENDING_PAGE_ROWS} as
   * the loop asks for them, so a backlog of millions is never held in memory (at most one page
   * beyond what the loop takes). Pages rather than a cursor: `.all()` of 2,000 rows costs less
   * per row than stepping a cursor (measured: 11.1 -> 9.3 ms CPU to pack a 10,000-scan batch,
   * min of 10). Run it inside `BufferStore.atomically` when the rows must be one snapshot (the
   * pages are separate statements). The packing rule that consumes it lives in `src/delivery/batcher.ts`.
   */
  *pendingScans(): IterableIterator<PendingScanRow> {
    let afterId = -1;
    for (;;) {
      const rows = this.s.pendingPage.all(afterId, PENDING_PAGE_ROWS) as PendingScanRow[];
      yield* rows;
      if (rows.length < PENDING_PAGE_ROWS) return;
      afterId = rows[rows.length - 1]!.id;
    }
  }

  /**
   * The first `limit` pending scans in id order, summed up in SQL without reading them out: how
   * many, how many distinct references among them, the sum of their stored JSON lengths, the first
   * and the last id. `formBatch` forms a batch from this alone when the head of the queue can
   * go whole (measured: 7 ms per 10,000 scans read into JavaScript, 1.8 ms summed in SQL). Run it
   * inside `BufferStore.atomically` with the {@link writeBatch} that uses it.
   */
  pendingHead(limit: number): PendingHead {
    return this.s.pendingHead.get(limit) as PendingHead;
  }

  /**
   * The head of the pending queue (the first `limit` pending scans in id order) as {@link
   * pendingHead} sums it, and cut into spans of `stepScans` scans (the last one shorter), read in
   * one snapshot without the write lock: the plan of a batch written in steps ({@link growBatch}).
   * Each step checks that its span is as planned, so what changed since is never batched.
   *
   * The spans are summed here from the head's ids and lengths, numbers only: 4.1 ms for 5,000
   * scans on a quiet machine where a windowed query in SQL made the plan 6.8 ms (medians of 60
   * alternated plans). Reading the references out as well, to count them here, took 2.4 ms, but
   * raised the outage row's peak RSS from 176 to 206–223 MiB (docs/performance.md, section 16).
   */
  planSteps(limit: number, stepScans: number): { head: PendingHead; spans: PendingSpan[] } {
    return this.db
      .transaction(() => {
        const head = this.pendingHead(limit);
        const rows = this.s.pendingIdBytes.all(limit) as [number, number][];
        const spans: PendingSpan[] = [];
        let span: PendingSpan | undefined;
        for (let i = 0; i < rows.length; i++) {
          const [id, bytes] = rows[i]!;
          if (i % stepScans === 0) {
            span = { first: id, last: id, count: 0, scanBytes: 0 };
            spans.push(span);
          }
          span!.last = id;
          span!.count += 1;
          span!.scanBytes += bytes;
        }
        return { head, spans };
      })
      .deferred();
  }

  /**
   * One step of a batch written in steps, in one short transaction: moves the pending scans of
   * `span` into the batch `into` (its id; a new `ready` batch of that mode and time stamp) and adds them to
   * its `scan_count` and `bytes`. The batch is a whole batch after every step, so a gateway stopped
   * between two is left with a smaller batch, sent as any other; the write lock is held for one
   * span, not for the whole batch, and the store connection's writers go in between steps
   * (docs/performance.md, section 16).
   *
   * The caller plans the spans ({@link planSteps}) so that the whole batch repeats no reference and
   * fits its byte limit. A span whose pending scans are no longer the planned count (a batch split
   * by a 413 released some into it) is not moved: the batch ends with the steps before.
   *
   * @returns the batch after the step, or undefined when the step moved nothing (the span changed,
   *   or the batch is no longer `ready`).
   * @throws GatewayError `SCANGW_E_BUFFER` on SQLite's error (`SCANGW_E_BUFFER_DISK_FULL` on a
   *   full disk, as every write).
   */
  growBatch(
    span: PendingSpan,
    into: number | { mode: BatchMode; nowIso: string },
  ): BatchRow | undefined {
    return this.db
      .transaction(() => {
        if (span.count === 0 || this.s.pendingInRange.get(span.first, span.last) !== span.count)
          return undefined;
        let batchId: number;
        if (typeof into !== 'number') {
          batchId = this.insertReady(
            into.mode,
            span.count,
            arrayBytes(span.count, span.scanBytes),
            into.nowIso,
          );
        } else {
          batchId = into;
          const batch = this.batch(batchId);
          if (!batch || batch.state !== 'ready') return undefined;
          const count = batch.scanCount + span.count;
          const sum = batch.bytes - arrayBytes(batch.scanCount, 0) + span.scanBytes;
          this.s.growBatch.run(count, arrayBytes(count, sum), batchId);
        }
        const moved = this.s.moveRange.run(batchId, span.first, span.last).changes;
        this.tookPending('growBatch', moved, span.count, span.scanBytes);
        return this.batch(batchId);
      })
      .immediate();
  }

  /**
   * Writes a new `ready` batch (its JSON array `bytes` long) and holds the scans in `hold` with
   * their reasons, in one transaction. The batch's scans are `scanIds`, or `range`: every pending
   * scan from `range.first` to `range.last`, `range.count` of them (from {@link pendingHead}).
   * With neither, or none in them, only the holds are written.
   * `scanBytes`, the sum of the scans' stored lengths, saves reading them again for the totals.
   * `gapless` says `scanIds` are every pending scan from the first id to the last (packScans
   * knows): they are then moved by that id range instead of by the list of ids. Either way every
   * scan must move, or nothing is written.
   *
   * @returns the new batch, or undefined when there is no scan to batch.
   * @throws GatewayError `SCANGW_E_BUFFER` when the scans that would move are not exactly
   *   `scanIds` or `range.count` (one of them is not pending, or a range claimed gapless holds others).
   */
  writeBatch(opts: {
    mode: BatchMode;
    scanIds?: readonly number[];
    range?: { first: number; last: number; count: number };
    bytes: number;
    scanBytes?: number;
    gapless?: boolean;
    nowIso: string;
    hold?: readonly { id: number; reason: string }[];
  }): BatchRow | undefined {
    const ids = opts.scanIds ?? [];
    const range =
      opts.range ??
      (opts.gapless && ids.length > 0
        ? { first: ids[0]!, last: ids[ids.length - 1]!, count: ids.length }
        : undefined);
    const count = range ? range.count : ids.length;
    return this.db
      .transaction(() => {
        if (opts.hold && opts.hold.length > 0)
          for (const o of opts.hold) this.s.hold.run(o.reason, o.id);
        if (count === 0) return undefined;
        const batchId = this.insertReady(opts.mode, count, opts.bytes, opts.nowIso);
        // One set-based statement: per-row updates were most of the drain's CPU.
        const moved = range
          ? this.s.moveRange.run(batchId, range.first, range.last).changes
          : this.s.moveIds.run(batchId, JSON.stringify(ids)).changes;
        const sum = opts.scanBytes ?? (this.s.batchBytes.get(batchId) as number);
        this.tookPending('writeBatch', moved, count, sum);
        return this.batch(batchId);
      })
      .immediate();
  }

  /**
   * Inserts a new `ready` batch of `mode`, `count` scans and `bytes` (its JSON array's length),
   * stamped `nowIso`; answers its id. Inside a write transaction. An SFTP batch is stored as mode
   * 'presigned' with route 'sftp': the `mode` column's CHECK cannot take 'sftp' (see the SFTP
   * delivery migration in migrations.ts).
   */
  private insertReady(mode: BatchMode, count: number, bytes: number, nowIso: string): number {
    const info = this.s.insertBatch.run(
      mode === 'sftp' ? 'presigned' : mode,
      mode === 'sftp' ? 'sftp' : null,
      count,
      bytes,
      nowIso,
    );
    return Number(info.lastInsertRowid);
  }

  /**
   * After scans moved `pending` → `batched`: takes `moved` scans and `scanBytes` from the pending
   * totals, once for the move (the counting triggers skip that transition, migration 10). Inside
   * the move's transaction.
   * @throws GatewayError `SCANGW_E_BUFFER` when `moved` is not `expected`, so that the
   *   transaction rolls back and nothing is batched.
   */
  private tookPending(by: string, moved: number, expected: number, scanBytes: number): void {
    if (moved !== expected) {
      throw new GatewayError(
        ErrorCodes.BUFFER,
        `${by}: ${moved} scans would have moved for the ${expected} given; nothing was batched`,
      );
    }
    this.s.takePending.run(moved, scanBytes);
  }

  /** The exact bytes sent for a batch: its scans' stored JSON, in id order, as one array. */
  batchBody(batchId: number): string {
    const bodies = this.s.body.all(batchId) as string[];
    return `[${bodies.join(',')}]`;
  }

  /**
   * {@link batchBody} as the bytes sent: SQLite joins the scans' stored JSON and hands the array
   * over as one blob, a Buffer outside V8's heap. A direct batch of 5,000 scans (about 1.2 MiB)
   * built as a JavaScript string is 5,000 row strings and one large string, which V8 puts straight
   * into its old generation and frees only at a full collection; beside a file being taken, those
   * bodies raised the gateway's peak (docs/performance.md, section 7).
   */
  batchBodyBytes(batchId: number): Buffer {
    return this.s.bodyBytes.get(batchId) as Buffer;
  }

  /**
   * One page of a batch's body, for streaming it without building it whole (SFTP; the
   * pre-signed PUT): the stored JSON of at most `limit` of its scans with an id above `afterId`, in
   * id order, joined by commas, as the bytes to send (with a comma before the first with
   * `leadingComma`: a page that does not start the array); `lastId` is the id to go on after,
   * `scans` how many it holds. Undefined when no scan of the batch is left after `afterId`. Each call is a
   * short statement of its own, so the connection is free for intake between pages.
   *
   * SQLite joins the page and hands it over as one blob: no row objects, no JavaScript string per
   * scan, no UTF-8 decoding and encoding again of bytes that are only passed on (measured: the
   * drain's body reading was about a tenth of the gateway's CPU as rows joined in JavaScript).
   */
  batchBodyPage(
    batchId: number,
    afterId: number,
    limit: number,
    leadingComma = false,
  ): { lastId: number; scans: number; bytes: Buffer } | undefined {
    const page = this.s.bodyPage.get(leadingComma ? ',' : '', batchId, afterId, limit) as {
      lastId: number | null;
      scans: number;
      bytes: Buffer | null;
    };
    return page.scans === 0 || page.lastId === null || page.bytes === null
      ? undefined
      : { lastId: page.lastId, scans: page.scans, bytes: page.bytes };
  }

  /** The SFTP batch whose remote file has the name `fileName` (the last part of its `remotePath`). */
  batchByRemoteName(fileName: string): BatchRow | undefined {
    if (fileName.includes('/')) return undefined;
    return this.s.byRemoteName.get(
      fileName,
      `%/${fileName.replace(/[\\%_]/g, (c) => `\\${c}`)}`,
    ) as BatchRow | undefined;
  }

  /**
   * The SFTP batch ended `transferred` (no word from the service yet) that holds every one of
   * `references`, newest first; undefined when none does. The scans are found by their references
   * (index `scans_reference`), so the cost grows with the scans that carry those references, not
   * with the transferred batches: a status event of another gateway is checked against it
   * (delivery/status-events.ts), and a search through every transferred batch's scans took 17 ms
   * per event with 500 batches of 200 scans.
   */
  transferredBatchOfReferences(references: readonly string[]): BatchRow | undefined {
    if (references.length === 0) return undefined;
    const unique = [...new Set(references)];
    const id = this.s.transferredOfReferences.get(JSON.stringify(unique), unique.length) as
      number | undefined;
    return id === undefined ? undefined : this.batch(id);
  }

  /** The highest batch id there is, 0 when there is none (a new batch's id is above it). */
  lastBatchId(): number {
    return this.s.lastBatchId.get() as number;
  }

  batch(id: number): BatchRow | undefined {
    return this.s.batch.get(id) as BatchRow | undefined;
  }

  /** The batches in any of `states`, oldest first. */
  batchesInState(...states: BatchState[]): BatchRow[] {
    return this.statement(
      `SELECT ${BATCH_COLUMNS} FROM batches WHERE state IN (${states.map(() => '?').join(',')}) ORDER BY id`,
    ).all(...states) as BatchRow[];
  }

  /** The requestId the service gave last (the newest batch that has one), for a status probe. */
  latestRequestId(): string | undefined {
    return (
      (this.statement(
        `SELECT request_id FROM batches WHERE request_id IS NOT NULL ORDER BY id DESC LIMIT 1`,
      )
        .pluck()
        .get() as string | undefined) ?? undefined
    );
  }

  /** The newest batch that carries `requestId` (contract §2.6, §2.7), whatever its state. */
  batchByRequestId(requestId: string): BatchRow | undefined {
    return this.s.byRequestId.get(requestId) as BatchRow | undefined;
  }

  /**
   * Updates the named columns of a batch (camelCase keys of BatchRow). With `possibleDuplicate`,
   * the same transaction counts the batch as possibly sent twice (its upload's answer was lost and
   * it is sent again): `batches.possible_duplicate` and the lifetime counters both grow.
   */
  updateBatch(
    id: number,
    fields: Partial<Omit<BatchRow, 'id' | 'possibleDuplicate'>>,
    opts: { possibleDuplicate?: boolean } = {},
  ): void {
    const entries = Object.entries(fields);
    const sets = entries.map(([k]) => `${k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)} = ?`);
    if (opts.possibleDuplicate) sets.push('possible_duplicate = possible_duplicate + 1');
    if (sets.length === 0) return;
    const update = () =>
      this.statement(`UPDATE batches SET ${sets.join(', ')} WHERE id = ?`).run(
        ...entries.map(([, v]) => v),
        id,
      );
    if (!opts.possibleDuplicate) {
      update();
      return;
    }
    this.db
      .transaction(() => {
        update();
        const scans = (this.s.scanCount.get(id) as number | undefined) ?? 0;
        this.s.addCounter.run('possibleDuplicateUploads', 1);
        this.s.addCounter.run('possibleDuplicateScans', scans);
      })
      .immediate();
  }

  /**
   * Halves a batch the service refused as too large (413): the newer half goes back to pending and
   * the batch is sent again without any address it had. Answers false for a single scan.
   */
  splitBatch(id: number): boolean {
    return this.db
      .transaction(() => {
        const ids = this.s.scanIds.all(id) as number[];
        if (ids.length < 2) return false;
        const keep = ids.slice(0, Math.ceil(ids.length / 2));
        const release = ids.slice(keep.length);
        for (const sid of release) this.s.release.run(sid);
        const sum = (this.s.batchBytes.get(id) as number) ?? 0;
        this.updateBatch(id, {
          scanCount: keep.length,
          bytes: arrayBytes(keep.length, sum),
          state: 'ready',
          requestId: null,
          presignedUrl: null,
          presignedExpiresAt: null,
          putStartedAt: null,
          nextAttemptAt: 0,
        });
        return true;
      })
      .immediate();
  }

  /** Holds a batch the service refused for good (a 4xx other than 401/408/413/429): kept, never dropped. */
  holdBatch(id: number, error: string): void {
    this.db
      .transaction(() => {
        this.updateBatch(id, { state: 'held', lastError: error });
        this.s.holdScans.run(error, id);
      })
      .immediate();
  }

  /**
   * Records a terminal status (contract §2.8): each failure's reason on the scan with that
   * reference, the other scans delivered. The delivered scans' rows are not written: a `batched`
   * row of a done batch is delivered (migration 13, src/buffer/scan-state.ts). When the batch
   * becomes done its batched scans are counted delivered here, once (buffer_totals,
   * scan_state_counts); a scan moved on from there (refused, now or in a report on a batch already
   * done, such as an SFTP batch `transferred`) is counted by the triggers as leaving `delivered`.
   */
  finishBatch(id: number, status: FinishedStatus, nowIso: string): void {
    this.db
      .transaction(() => {
        const wasDone = this.batch(id)?.state === 'done';
        this.updateBatch(id, {
          state: 'done',
          upstreamState: status.state,
          description: status.description ?? null,
          processed: status.processed ?? null,
          failed: status.failed ?? null,
          finishedAt: nowIso,
          // An error on the way (a 429 to a status check, say) is history once the batch is done.
          lastError: null,
        });
        // One walk of the batch's scans counts the batched ones (delivered from now on, which no
        // trigger counts) and those in any other state but delivered (rare; written below).
        const moving = this.s.moving.get(id) as { n: number; bytes: number; others: number };
        if (!wasDone && moving.n > 0) {
          this.s.delivered.run(moving.n, moving.bytes);
          this.s.deliveredCounts.run(moving.n);
        }
        const failures = status.failures ?? [];
        if (status.state === 'Failed' && failures.length === 0) {
          this.s.failAll.run(status.description ?? 'batch failed', id);
          return;
        }
        if (moving.others > 0) this.s.deliverOthers.run(id);
        for (const f of failures) this.s.failOne.run(f.reason, id, f.reference);
      })
      .immediate();
  }
}
