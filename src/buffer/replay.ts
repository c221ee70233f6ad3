import type { Read } from '../inputs/types.js';
import { connectionOf } from './connection.js';
import type { BufferStore } from './store.js';
import { indexedState } from './scan-state.js';
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
  result: { queued: true; newScanId?: number; reference: string; dcpKey: string } | { queued: false; why: string };
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

interface Candidate {
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
 * Replays the selected dead letters with `map` (the current configuration's mapping, without the
 * duplicate window: a replay is deliberate). Safe while the daemon runs on the same file: each
 * chunk is one short transaction, and the daemon's delivery picks the new pending scans up on its
 * next pass.
 *
 * @throws GatewayError `SCANGW_E_USAGE` when the selection is empty (neither a filter nor `all`).
 */
export function replayDeadLetters(store: BufferStore, map: (read: Read) => ReplayMapping, selection: ReplaySelection, nowMs: number): ReplayResult {
  const hasFilter = selection.batchId !== undefined || selection.dcpKey !== undefined || selection.reason !== undefined;
  if (!hasFilter && !selection.all) throw new GatewayError(ErrorCodes.USAGE, 'replay needs a selection: a batch, a DCP, a reason, or all');
  const candidates = selectCandidates(store, selection);
  const result: ReplayResult = { selected: 0, queued: 0, notQueued: 0, dryRun: selection.dryRun ?? false, items: [] };
  if (selection.rejected && selection.batchId === undefined) result.notReplayable = countInputLevel(store, selection);
  const db = connectionOf(store);
  const nowIso = new Date(nowMs).toISOString();

  const stillDead = db.prepare(`SELECT 1 FROM scan_rows WHERE id = ? AND replayed_by IS NULL AND state IN ('failed', 'held')`);
  const stillRejected = db.prepare(`SELECT 1 FROM reads WHERE id = ? AND outcome = 'rejected'`);

  for (let i = 0; i < candidates.length; i += CHUNK) {
    // IMMEDIATE: the write lock is taken before the re-check, so two replays never queue one read twice.
    db.transaction(() => {
      for (const c of candidates.slice(i, i + CHUNK)) {
        const current = c.scanId !== null ? stillDead.get(c.scanId) : stillRejected.get(c.readId);
        if (current === undefined) continue;
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
          item.result = { queued: true, reference: mapped.scan.reference, dcpKey: mapped.scan.dcpKey };
          if (!result.dryRun) {
            item.result.newScanId = store.queueReplayedScan(
              c,
              { dcpKey: mapped.scan.dcpKey, reference: mapped.scan.reference, timeUtc: mapped.instant.toISOString(), body },
              `replayed ${nowIso}; rejected before: ${c.previousReason ?? ''}`,
              nowMs,
            );
          }
          result.queued++;
        } else {
          item.result = { queued: false, why: mapped.outcome === 'noRead' ? 'the read is a no-read under the current configuration' : mapped.reason };
          result.notQueued++;
        }
        result.items.push(item);
      }
    }).immediate();
  }
  return result;
}

function countInputLevel(store: BufferStore, s: ReplaySelection): number {
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
  return connectionOf(store).prepare(`SELECT count(*) FROM reads WHERE ${where.join(' AND ')}`).pluck().get(...params) as number;
}

function selectCandidates(store: BufferStore, s: ReplaySelection): Candidate[] {
  const readColumns = `r.input_id AS inputId, r.received_at AS receivedAt, r.raw AS raw, r.source_time AS sourceTime,
    r.source_dcp_key AS sourceDcpKey, r.parents AS parents, r.attributes AS attributes, r.origin AS origin`;
  // indexedState: the condition of the partial index scans_state (src/buffer/scan-state.ts).
  const where: string[] = [`s.state IN ('failed', 'held')`, indexedState('s.'), `s.replayed_by IS NULL`];
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
  const scans = connectionOf(store)
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
  const rejected = connectionOf(store)
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
function toRead(c: Candidate): Read {
  const origin = c.origin !== null ? (JSON.parse(c.origin) as Record<string, string | number>) : undefined;
  if (origin?.format === 'scan') {
    // A ready Scan from a file of Scans: its stored JSON is the Scan itself, sent again as written.
    const checked = scanSchema.safeParse(JSON.parse(c.raw.toString('utf8')));
    if (checked.success) return { inputId: c.inputId, raw: c.raw, receivedAt: new Date(c.receivedAt), origin, readyScan: checked.data };
  }
  let parents = c.parents !== null ? (JSON.parse(c.parents) as string[]) : undefined;
  if (parents === undefined && c.oldBody !== null) {
    const old = (JSON.parse(c.oldBody) as { parents?: unknown }).parents;
    if (Array.isArray(old) && old.length > 0 && old.every((p) => typeof p === 'string')) parents = old as string[];
  }
  return {
    inputId: c.inputId,
    raw: c.raw,
    receivedAt: new Date(c.receivedAt),
    ...(c.sourceTime !== null ? { sourceTime: c.sourceTime } : {}),
    ...(c.sourceDcpKey !== null ? { dcpKey: c.sourceDcpKey } : {}),
    ...(parents !== undefined ? { parents } : {}),
    ...(c.attributes !== null ? { attributes: JSON.parse(c.attributes) as Record<string, string> } : {}),
    ...(origin !== undefined ? { origin } : {}),
  };
}
