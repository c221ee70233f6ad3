import type { FileChunk } from '../inputs/files/file-sink.js';
import type { MessageSubmitResult, MqttMessage } from '../inputs/mqtt/message-sink.js';
import type { IntakeItem, ItemOutcome, SubmitResult } from '../inputs/types.js';
import { mapRead, type MappingContext } from '../mapping/map-read.js';
import type { IntakeRecord } from '../buffer/store.js';
import type { IntakeDuplicates, TakenReference } from './duplicates.js';
import type { SliceState } from './slices.js';
import { mappedVerdict, rejectionVerdict } from './verdict.js';

/** A submit as intake holds it from `Intake.submit` to its commit (or its refusal). */
export interface Pending {
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
  /** A whole file's hash, committed with the records (receipts.ts). */
  file?: { inputId: string; hash: string; name: string };
  /** An MQTT message's identity, committed with the records (receipts.ts). */
  message?: MqttMessage & { inputId: string };
  /** A chunk of a file: the file's progress, committed with the records (receipts.ts). */
  chunk?: FileChunk;
  taken: TakenReference[];
  /** A message's resend committed before resolves `redelivered` (receipts.ts). */
  resolve: (result: MessageSubmitResult) => void;
  reject: (err: unknown) => void;
  /** A submit taken in slices (`inSlices`): each slice is committed as a submit of its own. */
  slices?: SliceState;
}

/** A record's verdict for its source. */
export type Verdict = Pick<ItemOutcome, 'verdict' | 'code' | 'reference'>;

/** What {@link toRecord} needs of intake: its scrubber, verdicts, duplicate window and counters. */
export interface RecordDeps {
  /** Cuts known secrets out of a reason before it is stored. */
  scrub: (text: string) => string;
  /** Each record's verdict for its source, handed back with the outcomes. */
  verdicts: WeakMap<IntakeRecord, Verdict>;
  dedupe: IntakeDuplicates;
  /** Counts the rule attributes a read did not get (IntakeCounters.noteNotSent). */
  noteNotSent: (
    inputId: string,
    rule: string | undefined,
    notes: string[],
    record: IntakeRecord,
  ) => void;
}

/**
 * One item of `pending` as the record to commit, mapped with `mapping` (the mapping of when it was
 * submitted): a rejection by the input as is; a read mapped, and a scan checked against the
 * duplicate window, its reference taken into `pending.taken` and its bytes into `pending.scans`.
 */
export function toRecord(
  item: IntakeItem,
  pending: Pending,
  mapping: MappingContext,
  deps: RecordDeps,
): IntakeRecord {
  if (item.kind === 'rejection') {
    const r = item.rejection;
    const rejected: IntakeRecord = {
      inputId: r.inputId,
      receivedAt: r.receivedAt,
      raw: r.raw,
      outcome: 'rejected',
      reason: deps.scrub(r.reason),
      inputLevel: true,
      ...(r.origin ? { origin: r.origin } : {}),
    };
    deps.verdicts.set(rejected, rejectionVerdict(r.code));
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
  deps.verdicts.set(record, mappedVerdict(result));
  if (result.outcome === 'noRead') {
    record.outcome = 'noRead';
    if (result.reason) record.reason = deps.scrub(result.reason);
    return record;
  }
  if (result.outcome === 'rejected') {
    record.outcome = 'rejected';
    record.reason = deps.scrub(result.reason);
    return record;
  }
  const { scan, instant } = result;
  const window = mapping.dcps.get(scan.dcpKey)?.duplicateWindowMs ?? 0;
  const duplicate = deps.dedupe.check(scan.dcpKey, scan.reference, instant.getTime(), window);
  if (duplicate) {
    record.outcome = 'duplicate';
    record.reason = `same reference at ${scan.dcpKey} within ${window} ms`;
    deps.verdicts.set(record, { verdict: 'nak', code: 'duplicate', reference: scan.reference });
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
  if (notes.length > 0) record.reason = deps.scrub(notes.join('; '));
  if (result.notes) deps.noteNotSent(read.inputId, result.rule, result.notes, record);
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

/** What each item of a submit became, with its verdict for the source, in the items' order. */
export function outcomesOf(p: Pending, verdicts: WeakMap<IntakeRecord, Verdict>): SubmitResult {
  return {
    outcomes: p.records.map((r): ItemOutcome => ({
      outcome: r.outcome,
      ...(r.reason !== undefined ? { reason: r.reason } : {}),
      ...verdicts.get(r),
    })),
  };
}
