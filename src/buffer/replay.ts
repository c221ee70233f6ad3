import type { Candidate, DeadLetters, ReplaySelection } from './dead-letters.js';
import { scanChanges, type ScanFieldChange } from './replay-changes.js';
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

export { DeadLetters, type Candidate, type ReplaySelection } from './dead-letters.js';
export { scanChanges, type ScanFieldChange } from './replay-changes.js';

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
