import type Database from 'better-sqlite3';
import type { ScanInsert } from './scan-insert.js';
import { indexedState } from './scan-state.js';
import type { StoredRead } from './rows.js';
import { scanSchema } from '@scan-gateway/contract';
import { ErrorCodes, GatewayError } from '../errors.js';

/**
 * Dead letters and replay: scans that failed upstream (`failed`) or were refused
 * as a whole batch (`held`) stay in the buffer with their reason and their original read. Replay
 * maps each original read again with the current configuration and queues the result as a new
 * pending scan; the dead letter is marked `replayed_by` the new scan (kept for audit, no longer
 * shown as a problem). Reads the mapping rejected can be replayed the same way (`rejected`).
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

/** What mapping a read again gave; the shape of the mapping's outcome that replay needs. */
export type ReplayMapping =
  | { outcome: 'scan'; scan: { reference: string; dcpKey: string }; instant: Date }
  | { outcome: 'rejected'; reason: string }
  | { outcome: 'noRead' };

export interface ReplayItem {
  /** The failed scan's id, or undefined for a rejected read. */
  scanId?: number;
  readId: number;
  reference?: string;
  previousReason: string;
  /** `queued` with the new scan's id, or why it was not queued. */
  result:
    | {
        queued: true;
        newScanId?: number;
        reference: string;
        dcpKey: string;
        /** Every field of the Scan that differs from the dead letter's (all of them for a rejected read). */
        changes: ScanFieldChange[];
      }
    | { queued: false; why: string };
}

/**
 * One field of a Scan (contract §2.5) that a replay changes: its text in the dead letter (`from`,
 * null when it had none or for a rejected read, which never was a scan) and in the new scan (`to`,
 * null when the new scan drops it; an empty list counts as none). Lists are one text: parents
 * comma-separated, attributes as `key=value` pairs.
 */
export interface ScanFieldChange {
  field: string;
  from: string | null;
  to: string | null;
}

/** The Scan's fields in the contract's order (§2.5). */
const SCAN_FIELDS = [
  'reference',
  'timeStamp',
  'dcpKey',
  'productModelKey',
  'supplierKey',
  'clientKey',
  'parents',
  'attributes',
] as const;

/** A Scan's fields as text, from its JSON (a body that is not JSON gives none). */
function scanFields(body: string | null): Record<string, string | null> {
  let o: Record<string, unknown> = {};
  try {
    const v: unknown = body === null ? null : JSON.parse(body);
    if (v && typeof v === 'object' && !Array.isArray(v)) o = v as Record<string, unknown>;
  } catch {
    // a stored body that is not JSON: every field of the new scan counts as a change
  }
  const text = (v: unknown): string | null => {
    if (v === undefined || v === null) return null;
    // An empty list is no value, as a missing one: no change between the two.
    if (Array.isArray(v))
      return v.length === 0
        ? null
        : v
            .map((x) =>
              x && typeof x === 'object' && 'key' in x
                ? `${String((x as { key: unknown }).key)}=${String((x as { value?: unknown }).value)}`
                : String(x),
            )
            .join(', ');
    return typeof v === 'string' ? v : JSON.stringify(v);
  };
  return Object.fromEntries(SCAN_FIELDS.map((f) => [f, text(o[f])]));
}

/** The fields of the Scan `newBody` that differ from the dead letter's `oldBody`, in the contract's order. */
export function scanChanges(oldBody: string | null, newBody: string): ScanFieldChange[] {
  const before = scanFields(oldBody);
  const after = scanFields(newBody);
  return SCAN_FIELDS.filter((f) => before[f] !== after[f]).map((f) => ({
    field: f,
    from: before[f] ?? null,
    to: after[f] ?? null,
  }));
}

export interface ReplayResult {
  selected: number;
  /**
   * With `rejected`: rejections of the same filter that never were a read (no barcode could be
   * framed or parsed: an empty CSV cell, line noise). Nothing to map again; counted so the totals
   * agree with `failures`.
   */
  notReplayable?: number;
  queued: number;
  notQueued: number;
  dryRun: boolean;
  items: ReplayItem[];
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

/** Rows per transaction, so the daemon's commits wait at most a moment for the write lock. */
const CHUNK = 500;

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

/**
 * Replays the selected dead letters with `map` (the current configuration's mapping, without the
 * duplicate window: a replay is deliberate). Safe while the daemon runs on the same file: each
 * chunk is one short transaction, and the daemon's delivery picks the new pending scans up on its
 * next pass.
 *
 * @throws GatewayError `SCANGW_E_USAGE` when the selection is empty (neither a filter nor `all`).
 */
export function replayDeadLetters(
  letters: DeadLetters,
  map: (read: StoredRead) => ReplayMapping,
  selection: ReplaySelection,
  nowMs: number,
): ReplayResult {
  const hasFilter =
    selection.batchId !== undefined ||
    selection.dcpKey !== undefined ||
    selection.reason !== undefined;
  if (!hasFilter && !selection.all)
    throw new GatewayError(
      ErrorCodes.USAGE,
      'replay needs a selection: a batch, a DCP, a reason, or all',
    );
  const candidates = letters.candidates(selection);
  const result: ReplayResult = {
    selected: 0,
    queued: 0,
    notQueued: 0,
    dryRun: selection.dryRun ?? false,
    items: [],
  };
  if (selection.rejected && selection.batchId === undefined)
    result.notReplayable = letters.countInputLevel(selection);
  const nowIso = new Date(nowMs).toISOString();

  for (let i = 0; i < candidates.length; i += CHUNK) {
    // IMMEDIATE: the write lock is taken before the re-check, so two replays never queue one read twice.
    letters.transaction(() => {
      for (const c of candidates.slice(i, i + CHUNK)) {
        if (!letters.stillOpen(c)) continue;
        result.selected++;
        const mapped = map(toRead(c));
        const item: ReplayItem = {
          ...(c.scanId !== null ? { scanId: c.scanId } : {}),
          readId: c.readId,
          ...(c.reference !== null ? { reference: c.reference } : {}),
          previousReason: c.previousReason ?? '',
          result: { queued: false, why: '' },
        };
        if (mapped.outcome === 'scan') {
          const body = JSON.stringify((mapped as { scan: unknown }).scan);
          item.result = {
            queued: true,
            reference: mapped.scan.reference,
            dcpKey: mapped.scan.dcpKey,
            changes: scanChanges(c.oldBody, body),
          };
          if (!result.dryRun) {
            item.result.newScanId = letters.queueReplayedScan(
              c,
              {
                dcpKey: mapped.scan.dcpKey,
                reference: mapped.scan.reference,
                timeUtc: mapped.instant.toISOString(),
                body,
              },
              `replayed ${nowIso}; rejected before: ${c.previousReason ?? ''}`,
              nowMs,
            );
          }
          result.queued++;
        } else {
          item.result = {
            queued: false,
            why:
              mapped.outcome === 'noRead'
                ? 'the read is a no-read under the current configuration'
                : mapped.reason,
          };
          result.notQueued++;
        }
        result.items.push(item);
      }
    });
  }
  return result;
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

/**
 * The read as the source gave it, rebuilt from the stored row. Parents the source did not give
 * came from a container session at the time (state replay cannot rebuild): they are taken from the
 * failed scan, so a replayed member keeps its container.
 */
function toRead(c: Candidate): StoredRead {
  const origin =
    c.origin !== null ? (JSON.parse(c.origin) as Record<string, string | number>) : undefined;
  if (origin?.format === 'scan') {
    // A ready Scan from a file of Scans: its stored JSON is the Scan itself, sent again as written.
    const checked = scanSchema.safeParse(JSON.parse(c.raw.toString('utf8')));
    if (checked.success)
      return {
        inputId: c.inputId,
        raw: c.raw,
        receivedAt: new Date(c.receivedAt),
        origin,
        readyScan: checked.data,
      };
  }
  let parents = c.parents !== null ? (JSON.parse(c.parents) as string[]) : undefined;
  if (parents === undefined && c.oldBody !== null) {
    const old = (JSON.parse(c.oldBody) as { parents?: unknown }).parents;
    if (Array.isArray(old) && old.length > 0 && old.every((p) => typeof p === 'string'))
      parents = old as string[];
  }
  return {
    inputId: c.inputId,
    raw: c.raw,
    receivedAt: new Date(c.receivedAt),
    ...(c.sourceTime !== null ? { sourceTime: c.sourceTime } : {}),
    ...(c.sourceDcpKey !== null ? { dcpKey: c.sourceDcpKey } : {}),
    ...(parents !== undefined ? { parents } : {}),
    ...(c.attributes !== null
      ? { attributes: JSON.parse(c.attributes) as Record<string, string> }
      : {}),
    ...(origin !== undefined ? { origin } : {}),
  };
}
