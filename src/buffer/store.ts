import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ErrorCodes, GatewayError } from '../errors.js';
import { MIGRATIONS } from './migrations.js';

/** One read as it is committed: its raw bytes, its outcome and, for a scan, the serialized Scan. */
export interface IntakeRecord {
  inputId: string;
  receivedAt: Date;
  raw: Buffer;
  sourceTime?: string;
  dcpKey?: string;
  origin?: Record<string, string | number>;
  outcome: 'scan' | 'rejected' | 'noRead' | 'duplicate';
  reason?: string;
  /** True for an input-level rejection (nothing could be framed or parsed into a read). */
  inputLevel?: boolean;
  scan?: { reference: string; dcpKey: string; instant: Date; body: string };
}

export type BatchMode = 'direct' | 'presigned';
export type BatchState = 'ready' | 'uploading' | 'presigned' | 'uploaded' | 'done' | 'held';

/** A batch row (see migrations.ts), in camelCase. */
export interface BatchRow {
  id: number;
  mode: BatchMode;
  state: BatchState;
  scanCount: number;
  bytes: number;
  requestId: string | null;
  presignedUrl: string | null;
  presignedExpiresAt: number | null;
  attempts: number;
  nextAttemptAt: number;
  lastError: string | null;
  possibleDuplicate: number;
  createdAt: string;
  uploadedAt: string | null;
  finishedAt: string | null;
  upstreamState: string | null;
  description: string | null;
  processed: number | null;
  failed: number | null;
  polls: number;
}

const BATCH_COLUMNS = `id, mode, state, scan_count AS scanCount, bytes, request_id AS requestId,
  presigned_url AS presignedUrl, presigned_expires_at AS presignedExpiresAt, attempts,
  next_attempt_at AS nextAttemptAt, last_error AS lastError, possible_duplicate AS possibleDuplicate,
  created_at AS createdAt, uploaded_at AS uploadedAt, finished_at AS finishedAt,
  upstream_state AS upstreamState, description, processed, failed, polls`;

/** Bytes of `[a,b,c]` for scans whose serialized lengths sum to `sum`: brackets plus n-1 commas. */
export function arrayBytes(count: number, sum: number): number {
  return count === 0 ? 2 : 2 + sum + (count - 1);
}

/**
 * The durable buffer: an outbox in SQLite (WAL, `synchronous=FULL`). Every read is written before
 * its source is acknowledged; scans leave the outbox only when upstream reports them processed,
 * and even then stay for audit.
 *
 * @throws GatewayError `SCANGW_E_BUFFER` when the file cannot be opened or migrated.
 */
export class BufferStore {
  readonly db: Database.Database;

  constructor(readonly path: string) {
    try {
      if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
      this.db = new Database(path);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = FULL');
      this.db.pragma('busy_timeout = 5000');
      this.db.pragma('foreign_keys = ON');
      this.migrate();
    } catch (err) {
      throw new GatewayError(ErrorCodes.BUFFER, `cannot open the buffer ${path}: ${(err as Error).message}`, { cause: err });
    }
  }

  private migrate(): void {
    const version = this.db.pragma('user_version', { simple: true }) as number;
    for (let v = version; v < MIGRATIONS.length; v++) {
      this.db.transaction(() => {
        this.db.exec(MIGRATIONS[v]!);
        this.db.pragma(`user_version = ${v + 1}`);
      })();
    }
  }

  private statements?: { read: Database.Statement; scan: Database.Statement };

  /** Commits a group of reads (and their scans) in one transaction. Throws on failure; nothing is then written. */
  commitIntake(records: readonly IntakeRecord[], nowMs: number): void {
    this.statements ??= {
      read: this.db.prepare(
        `INSERT INTO reads (input_id, received_at, raw, source_time, dcp_key, origin, outcome, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      scan: this.db.prepare(
        `INSERT INTO scans (read_id, dcp_key, reference, time_utc, body, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
    };
    const { read, scan } = this.statements;
    this.db.transaction(() => {
      for (const r of records) {
        const info = read.run(
          r.inputId,
          r.receivedAt.toISOString(),
          r.raw,
          r.sourceTime ?? null,
          r.scan?.dcpKey ?? r.dcpKey ?? null,
          r.origin ? JSON.stringify(r.origin) : null,
          r.outcome,
          r.reason ?? null,
        );
        if (r.scan) {
          scan.run(info.lastInsertRowid, r.scan.dcpKey, r.scan.reference, r.scan.instant.toISOString(), r.scan.body, Buffer.byteLength(r.scan.body), nowMs);
        }
      }
    })();
  }

  /** Count of scans not yet in a batch, and the `created_at` (ms) of the oldest. */
  pending(): { count: number; oldestCreatedAt: number | null } {
    const row = this.db.prepare(`SELECT count(*) AS count, min(created_at) AS oldest FROM scans WHERE state = 'pending'`).get() as {
      count: number;
      oldest: number | null;
    };
    return { count: row.count, oldestCreatedAt: row.oldest };
  }

  /** Scans waiting for delivery: not in a batch yet, or in a batch not yet finished upstream. */
  undelivered(): number {
    return (this.db.prepare(`SELECT count(*) AS n FROM scans WHERE state IN ('pending', 'batched')`).get() as { n: number }).n;
  }

  /**
   * Packs the oldest pending scans into a new batch of at most `maxScans` scans whose JSON array
   * is at most `maxBytes` bytes, never two scans with the same reference (so each failure in a
   * status answer maps to exactly one scan). Answers undefined when nothing is pending.
   */
  formBatch(opts: { maxScans: number; maxBytes: number; mode: BatchMode; nowIso: string }): BatchRow | undefined {
    return this.db.transaction(() => {
      const ids: number[] = [];
      const references = new Set<string>();
      let sum = 0;
      const rows = this.db
        .prepare(`SELECT id, reference, bytes FROM scans WHERE state = 'pending' ORDER BY id LIMIT ?`)
        .iterate(opts.maxScans * 2) as IterableIterator<{ id: number; reference: string; bytes: number }>;
      for (const row of rows) {
        if (references.has(row.reference)) continue;
        if (arrayBytes(ids.length + 1, sum + row.bytes) > opts.maxBytes) {
          if (ids.length === 0) continue; // a single scan over the limit cannot be sent directly; left for a pre-signed batch
          break;
        }
        ids.push(row.id);
        references.add(row.reference);
        sum += row.bytes;
        if (ids.length >= opts.maxScans) break;
      }
      if (ids.length === 0) return undefined;
      const info = this.db
        .prepare(`INSERT INTO batches (mode, state, scan_count, bytes, created_at) VALUES (?, 'ready', ?, ?, ?)`)
        .run(opts.mode, ids.length, arrayBytes(ids.length, sum), opts.nowIso);
      const batchId = Number(info.lastInsertRowid);
      const mark = this.db.prepare(`UPDATE scans SET state = 'batched', batch_id = ? WHERE id = ?`);
      for (const id of ids) mark.run(batchId, id);
      return this.batch(batchId);
    })();
  }

  /** The exact bytes sent for a batch: its scans' stored JSON, in id order, as one array. */
  batchBody(batchId: number): string {
    const bodies = this.db.prepare(`SELECT body FROM scans WHERE batch_id = ? ORDER BY id`).pluck().all(batchId) as string[];
    return `[${bodies.join(',')}]`;
  }

  batch(id: number): BatchRow | undefined {
    return this.db.prepare(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = ?`).get(id) as BatchRow | undefined;
  }

  batchesInState(...states: BatchState[]): BatchRow[] {
    return this.db
      .prepare(`SELECT ${BATCH_COLUMNS} FROM batches WHERE state IN (${states.map(() => '?').join(',')}) ORDER BY id`)
      .all(...states) as BatchRow[];
  }

  recentBatches(limit: number): BatchRow[] {
    return this.db.prepare(`SELECT ${BATCH_COLUMNS} FROM batches ORDER BY id DESC LIMIT ?`).all(limit) as BatchRow[];
  }

  /** Updates the named columns of a batch (camelCase keys of BatchRow). */
  updateBatch(id: number, fields: Partial<Omit<BatchRow, 'id'>>): void {
    const entries = Object.entries(fields);
    if (entries.length === 0) return;
    const sets = entries.map(([k]) => `${k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)} = ?`).join(', ');
    this.db.prepare(`UPDATE batches SET ${sets} WHERE id = ?`).run(...entries.map(([, v]) => v), id);
  }

  /**
   * Halves a batch the service refused as too large (413): the newer half goes back to pending.
   * Answers false when the batch holds a single scan and cannot be split.
   */
  splitBatch(id: number): boolean {
    return this.db.transaction(() => {
      const ids = this.db.prepare(`SELECT id FROM scans WHERE batch_id = ? ORDER BY id`).pluck().all(id) as number[];
      if (ids.length < 2) return false;
      const keep = ids.slice(0, Math.ceil(ids.length / 2));
      const release = ids.slice(keep.length);
      const reset = this.db.prepare(`UPDATE scans SET state = 'pending', batch_id = NULL WHERE id = ?`);
      for (const sid of release) reset.run(sid);
      const sum = (this.db.prepare(`SELECT sum(bytes) FROM scans WHERE batch_id = ?`).pluck().get(id) as number) ?? 0;
      this.updateBatch(id, { scanCount: keep.length, bytes: arrayBytes(keep.length, sum), state: 'ready' });
      return true;
    })();
  }

  /** Holds a batch the service refused for good (a 4xx other than 401/408/413/429): kept, never dropped. */
  holdBatch(id: number, error: string): void {
    this.db.transaction(() => {
      this.updateBatch(id, { state: 'held', lastError: error });
      this.db.prepare(`UPDATE scans SET state = 'held', failure_reason = ? WHERE batch_id = ?`).run(error, id);
    })();
  }

  /**
   * Records a terminal status (contract §2.8): each failure's reason on the scan with that
   * reference, the other scans delivered.
   */
  finishBatch(
    id: number,
    status: { state: string; description?: string; processed?: number; failed?: number; failures?: { reference: string; reason: string }[] },
    nowIso: string,
  ): void {
    this.db.transaction(() => {
      this.updateBatch(id, {
        state: 'done',
        upstreamState: status.state,
        description: status.description ?? null,
        processed: status.processed ?? null,
        failed: status.failed ?? null,
        finishedAt: nowIso,
      });
      const failures = status.failures ?? [];
      if (status.state === 'Failed' && failures.length === 0) {
        this.db.prepare(`UPDATE scans SET state = 'failed', failure_reason = ? WHERE batch_id = ?`).run(status.description ?? 'batch failed', id);
        return;
      }
      this.db.prepare(`UPDATE scans SET state = 'delivered' WHERE batch_id = ?`).run(id);
      const fail = this.db.prepare(`UPDATE scans SET state = 'failed', failure_reason = ? WHERE batch_id = ? AND reference = ?`);
      for (const f of failures) fail.run(f.reason, id, f.reference);
    })();
  }

  /** Scan counts by state. */
  scanCounts(): Record<string, number> {
    const rows = this.db.prepare(`SELECT state, count(*) AS n FROM scans GROUP BY state`).all() as { state: string; n: number }[];
    return Object.fromEntries(rows.map((r) => [r.state, r.n]));
  }

  /** The latest failed scans and rejected reads, newest first, for people. */
  recentProblems(limit: number): { kind: 'failed' | 'rejected'; inputId: string; reference?: string; reason: string; raw: Buffer; at: string; origin?: string }[] {
    return this.db
      .prepare(
        `SELECT * FROM (
           SELECT 'failed' AS kind, r.input_id AS inputId, s.reference AS reference, s.failure_reason AS reason, r.raw AS raw, r.received_at AS at, r.origin AS origin, r.id AS rid
             FROM scans s JOIN reads r ON r.id = s.read_id WHERE s.state IN ('failed', 'held')
           UNION ALL
           SELECT 'rejected', input_id, NULL, reason, raw, received_at, origin, id FROM reads WHERE outcome = 'rejected'
         ) ORDER BY rid DESC LIMIT ?`,
      )
      .all(limit) as { kind: 'failed' | 'rejected'; inputId: string; reference?: string; reason: string; raw: Buffer; at: string; origin?: string }[];
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
