import type { FileHandle } from 'node:fs/promises';
import { relative } from 'node:path';
import { isGatewayError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { InputRejection, IntakeItem } from '../types.js';
import type { FileSink } from './file-sink.js';
import type { FileParseContext } from './file-format.js';
import {
  CR,
  completeLinesEnd,
  FILE_REJECTION_RAW_BYTES,
  hashRange,
  LF,
  readRange,
} from './file-ranges.js';
import type { IngestLedger } from './ingest-ledger.js';
import { lineBreaksBefore, type ByteRange } from './parse-lines.js';
import type { Clock } from '../../clock.js';

/**
 * Storing what a file grew by after it was taken ({@link GrowthWatch} in file-growth.ts decides
 * when): complete lines as parts of their own, each with its content hash, recorded by the intake
 * and the ledger; a JSON file's growth, an unreadable part or a last incomplete line at stop as a
 * rejection.
 */

/** Most bytes of appended growth parsed and committed as one part (bounds the part's items in memory). */
export const GROWTH_PART_BYTES = 8 * 1024 * 1024;

/** What storing a watched file's growth needs of its files input. */
export interface GrowthPartOptions {
  inputId: string;
  /** The watched folder (origins name files relative to it). */
  dir: string;
  format: 'lines' | 'csv' | 'ndjson' | 'json';
  rememberFilesDays: number;
  sink: FileSink;
  ledger: IngestLedger;
  log: Logger;
  now: Clock;
  /** Parses bytes `range` of the open file in the input's format (all its items at once). */
  parse: (handle: FileHandle, ctx: FileParseContext, range: ByteRange) => Promise<IntakeItem[]>;
  maxReadLength: number;
}

/** A file watched for growth, and how far it is stored. */
export interface Watched {
  /** Where the file is now (in `processed/`). */
  path: string;
  /** Its name when it was taken. */
  name: string;
  /** Bytes stored so far, from the start of the file. */
  taken: number;
  size: number;
  mtimeMs: number;
  /** When size or mtime last changed (ms since epoch). */
  changedAt: number;
  timer: NodeJS.Timeout | undefined;
  /** A check in progress (so stop() can wait for it). */
  running: Promise<void> | undefined;
  /** Refused submits in a row: the next try waits longer. */
  failures: number;
  retryAt: number;
}

/** Stores bytes `[w.taken, size)`: complete lines as a part (all when `final`), or a rejection. */
export async function storeGrowth(
  o: GrowthPartOptions,
  handle: FileHandle,
  w: Watched,
  size: number,
  final: boolean,
  stopping: boolean,
): Promise<void> {
  const where = relative(o.dir, w.path);
  const advice =
    'write files under a temporary name (*.tmp) and rename them when complete, or raise stableMs';
  if (o.format === 'json') {
    const reason =
      `file grew by ${size - w.taken} bytes after it was taken (a JSON array cannot be read in parts): ` +
      `bytes ${w.taken}-${size} of ${where} were not stored; ${advice}`;
    await rejectRange(o, handle, w, reason, w.taken, size, where);
    w.taken = size;
    return;
  }
  // Parts of at most GROWTH_PART_BYTES (ending at a line break), each parsed and committed on its
  // own: a writer appending a gigabyte does not make one array of it.
  while (size - w.taken > GROWTH_PART_BYTES) {
    const sliceEnd = await completeLinesEnd(handle, w.taken, w.taken + GROWTH_PART_BYTES);
    if (sliceEnd === undefined) break; // no line break in 8 MiB: one overlong line, taken below
    await storePart(o, handle, w, sliceEnd, where, advice);
  }
  const end = final && !stopping ? size : await completeLinesEnd(handle, w.taken, size);
  if (end !== undefined) await storePart(o, handle, w, end, where, advice);
  if (stopping && w.taken < size) {
    const reason = `file grew after it was taken and the gateway stopped before its last line was complete: bytes ${w.taken}-${size} of ${where} were not stored; ${advice}`;
    await rejectRange(o, handle, w, reason, w.taken, size, where);
    w.taken = size;
  }
}

/** Parses and submits bytes `[w.taken, end)` (complete lines) as a part of their own. */
async function storePart(
  o: GrowthPartOptions,
  handle: FileHandle,
  w: Watched,
  end: number,
  where: string,
  advice: string,
): Promise<void> {
  const before = await lineBreaksBefore(handle, w.taken);
  // Taken in the middle of a line (and the part goes on with that line): read the line again
  // whole, and report it.
  const [next] = await readRange(handle, w.taken, w.taken + 1);
  const cutOff = !before.endsWithBreak && next !== CR && next !== LF;
  const [previous] = w.taken > 0 ? await readRange(handle, w.taken - 1, w.taken) : [];
  // A CRLF split by the take: its LF is no line of its own.
  const start = cutOff
    ? before.lastLineStart
    : previous === CR && next === LF
      ? w.taken + 1
      : w.taken;
  const firstLine = before.breaks + 1;
  const sha256 = await hashRange(handle, 0, end);
  const receivedAt = new Date(o.now());
  const earlier = o.rememberFilesDays > 0 ? o.ledger.find(sha256) : undefined;
  if (earlier) {
    w.taken = end;
    return;
  }
  const ctx: FileParseContext = {
    inputId: o.inputId,
    fileName: w.name,
    receivedAt,
    maxReadLength: o.maxReadLength,
    sha256,
  };
  let items: IntakeItem[];
  try {
    items = await o.parse(handle, ctx, { start, end, firstLine });
  } catch (err) {
    if (!isGatewayError(err)) throw err;
    const reason = `file grew after it was taken and the appended part cannot be read: ${err.message}; bytes ${w.taken}-${end} of ${where} were not stored; ${advice}`;
    await rejectRange(o, handle, w, reason, w.taken, end, where);
    w.taken = end;
    return;
  }
  if (start < w.taken) {
    items = items.filter(
      (item) =>
        (item.kind === 'read' ? item.read.origin?.['line'] : item.rejection.origin?.['line']) !==
        firstLine,
    );
    const whole = await readRange(handle, start, Math.min(end, start + FILE_REJECTION_RAW_BYTES));
    const lineEnd = whole.findIndex((b) => b === CR || b === LF);
    const raw = lineEnd >= 0 ? whole.subarray(0, lineEnd) : whole;
    const rejection: InputRejection = {
      inputId: o.inputId,
      raw: Buffer.from(raw),
      receivedAt,
      reason:
        `line ${firstLine} was still being written when the file was taken: its first ${w.taken - start} bytes were stored on their own ` +
        `(check that read); this is the whole line; ${advice}`,
      origin: { file: w.name, line: firstLine, sha256, movedTo: where },
    };
    items.unshift({ kind: 'rejection', rejection });
  }
  if (items.length > 0) {
    if (o.rememberFilesDays > 0) await o.sink.submitFile(items, { hash: sha256, name: w.name });
    else await o.sink.submit(items);
  }
  const rejections = items.reduce((n, item) => n + (item.kind === 'rejection' ? 1 : 0), 0);
  o.log.warn(
    {
      file: w.name,
      path: w.path,
      from: w.taken,
      to: end,
      reads: items.length - rejections,
      rejections,
      advice,
    },
    'file grew after it was taken and moved to processed/ (the writer paused longer than stableMs); the appended lines were stored as a part of their own',
  );
  if (o.rememberFilesDays > 0) {
    await o.ledger
      .record(sha256, `${w.name} (bytes ${w.taken}-${end}, appended)`)
      .catch((err: unknown) =>
        o.log.warn({ err, file: w.name }, 'cannot write the ingested-files ledger'),
      );
  }
  w.taken = end;
}

/** Stores bytes `[from, to)` of the file as one rejection (its first FILE_REJECTION_RAW_BYTES as `raw`) and logs the reason. */
async function rejectRange(
  o: GrowthPartOptions,
  handle: FileHandle,
  w: Watched,
  reason: string,
  from: number,
  to: number,
  where: string,
): Promise<void> {
  const raw = await readRange(handle, from, Math.min(to, from + FILE_REJECTION_RAW_BYTES));
  const rejection: InputRejection = {
    inputId: o.inputId,
    raw,
    receivedAt: new Date(o.now()),
    reason,
    origin: { file: w.name, movedTo: where, from, to },
  };
  await o.sink.submit([{ kind: 'rejection', rejection }]);
  o.log.warn({ file: w.name, path: w.path, from, to }, reason);
}
