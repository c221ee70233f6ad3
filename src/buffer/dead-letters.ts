import type Database from 'better-sqlite3';
import type { ScanInsert } from './scan-insert.js';
import { indexedState } from './scan-state.js';

/**
 * The dead letters in the buffer (scans `failed` upstream or `held`, and with `rejected` the reads
 * the mapping rejected): the SQL that selects them by a replay's filters, re-checks them and marks
 * them replayed. What replay does with them is replay.ts.
 */

/** Which dead letters to replay. Filters combine (AND); `all` with no filter takes every one. */
export interface ReplaySelection {
  /** Gateway batch id (`batches.id`, shown on the health page), not the upstream requestId. */
  batchId?: number;
  /** DCP key of the failed scan. */
  dcpKey?: string;
  /** Text the failure reason contains (case-insensitive). */
  reason?: string;
  all?: boolean;
  /** Also reads the mapping rejected (not input-level rejections, which never were a read). */
  rejected?: boolean;
  /** Only report what would happen; write nothing. */
  dryRun?: boolean;
}

/** A dead letter (or rejected read) chosen by a selection, with its original read. */
export interface Candidate {
  scanId: number | null;
  readId: number;
  reference: string | null;
  previousReason: string | null;
  inputId: string;
  receivedAt: string;
  raw: Buffer;
  sourceTime: string | null;
  sourceDcpKey: string | null;
  parents: string | null;
  attributes: string | null;
  origin: string | null;
  /** The failed scan's JSON (null for a rejected read). */
  oldBody: string | null;
}

/**
 * The dead letters of the buffer and their replay's writes. Built by `BufferStore.open` on its
 * connection (`store.deadLetters`); the statements of fixed text are prepared once, here; the
 * selections' (their filters vary) at each replay, which is rare and done by a person.
 */
export class DeadLetters {
  private readonly stillDead: Database.Statement;
  private readonly stillRejected: Database.Statement;
  private readonly markScan: Database.Statement;
  private readonly markRead: Database.Statement;

  constructor(
    private readonly db: Database.Database,
    private readonly scans: ScanInsert,
  ) {
    this.stillDead = db.prepare(
      `SELECT 1 FROM scan_rows WHERE id = ? AND replayed_by IS NULL AND state IN ('failed', 'held')`,
    );
    this.stillRejected = db.prepare(`SELECT 1 FROM reads WHERE id = ? AND outcome = 'rejected'`);
    this.markScan = db.prepare(
      `UPDATE scan_rows SET replayed_by = ? WHERE id = ? AND replayed_by IS NULL`,
    );
    this.markRead = db.prepare(
      `UPDATE reads SET outcome = 'scan', dcp_key = ?, reason = ? WHERE id = ? AND outcome = 'rejected'`,
    );
  }

  /** The dead letters (and, with `rejected`, the rejected reads) `selection` names, in id order. */
  candidates(selection: ReplaySelection): Candidate[] {
    return selectCandidates(this.db, selection);
  }

  /** Rejections the selection's filters match that never were a read (see {@link ReplayResult.notReplayable}). */
  countInputLevel(selection: ReplaySelection): number {
    return countInputLevel(this.db, selection);
  }

  /** Whether the candidate is still a dead letter (or a rejected read) not yet replayed: a second replay may have come first. */
  stillOpen(c: Candidate): boolean {
    return (
      (c.scanId !== null ? this.stillDead.get(c.scanId) : this.stillRejected.get(c.readId)) !==
      undefined
    );
  }

  /** Runs `fn` in one IMMEDIATE transaction: the write lock is taken before the re-checks in it. */
  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  /**
   * Queues the new scan of a replayed dead letter as pending and marks what it replaces: the
   * failed or held scan `replaces.scanId` (`replayed_by`), or else the rejected read, which becomes
   * a scan read with `reason` as its audit note. Runs inside the caller's transaction. Answers the
   * new scan's id.
   */
  queueReplayedScan(
    replaces: { scanId: number | null; readId: number },
    scan: { dcpKey: string; reference: string; timeUtc: string; body: string },
    reason: string,
    nowMs: number,
  ): number {
    const newId = this.scans.run(
      replaces.readId,
      scan.dcpKey,
      scan.reference,
      scan.timeUtc,
      scan.body,
      Buffer.byteLength(scan.body),
      nowMs,
    );
    if (replaces.scanId !== null) this.markScan.run(newId, replaces.scanId);
    else this.markRead.run(scan.dcpKey, reason, replaces.readId);
    return newId;
  }
}

function countInputLevel(db: Database.Database, s: ReplaySelection): number {
  const where: string[] = [`outcome = 'rejected'`, `input_level = 1`];
  const params: unknown[] = [];
  if (s.dcpKey !== undefined) {
    where.push('dcp_key = ?');
    params.push(s.dcpKey);
  }
  if (s.reason !== undefined) {
    where.push(`instr(lower(coalesce(reason, '')), lower(?)) > 0`);
    params.push(s.reason);
  }
  return db
    .prepare(`SELECT count(*) FROM reads WHERE ${where.join(' AND ')}`)
    .pluck()
    .get(...params) as number;
}

function selectCandidates(db: Database.Database, s: ReplaySelection): Candidate[] {
  const readColumns = `r.input_id AS inputId, r.received_at AS receivedAt, r.raw AS raw, r.source_time AS sourceTime,
    r.source_dcp_key AS sourceDcpKey, r.parents AS parents, r.attributes AS attributes, r.origin AS origin`;
  // indexedState: the condition of the partial index scans_state (src/buffer/scan-state.ts).
  const where: string[] = [
    `s.state IN ('failed', 'held')`,
    indexedState('s.'),
    `s.replayed_by IS NULL`,
  ];
  const params: unknown[] = [];
  if (s.batchId !== undefined) {
    where.push('s.batch_id = ?');
    params.push(s.batchId);
  }
  if (s.dcpKey !== undefined) {
    where.push('s.dcp_key = ?');
    params.push(s.dcpKey);
  }
  if (s.reason !== undefined) {
    where.push(`instr(lower(coalesce(s.failure_reason, '')), lower(?)) > 0`);
    params.push(s.reason);
  }
  const scans = db
    .prepare(
      `SELECT s.id AS scanId, s.read_id AS readId, s.reference AS reference, s.failure_reason AS previousReason, (SELECT body FROM scan_bodies b WHERE b.id = s.id) AS oldBody, ${readColumns}
       FROM scan_rows s JOIN reads r ON r.id = s.read_id WHERE ${where.join(' AND ')} ORDER BY s.id`,
    )
    .all(...params) as Candidate[];
  if (!s.rejected || s.batchId !== undefined) return scans;
  // Mapping rejections: a DCP filter matches the DCP the read was stored under.
  const rwhere: string[] = [`r.outcome = 'rejected'`, `r.input_level = 0`];
  const rparams: unknown[] = [];
  if (s.dcpKey !== undefined) {
    rwhere.push('r.dcp_key = ?');
    rparams.push(s.dcpKey);
  }
  if (s.reason !== undefined) {
    rwhere.push(`instr(lower(coalesce(r.reason, '')), lower(?)) > 0`);
    rparams.push(s.reason);
  }
  const rejected = db
    .prepare(
      `SELECT NULL AS scanId, r.id AS readId, NULL AS reference, r.reason AS previousReason, NULL AS oldBody, ${readColumns}
       FROM reads r WHERE ${rwhere.join(' AND ')} ORDER BY r.id`,
    )
    .all(...rparams) as Candidate[];
  return [...scans, ...rejected];
}
