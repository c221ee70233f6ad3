import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { relative } from 'node:path';
import { isGatewayError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { InputRejection, IntakeItem, IntakeSink } from '../types.js';
import { readBlocks, type FileParseContext } from './file-format.js';
import type { IngestLedger } from './ingest-ledger.js';
import { lineBreaksBefore, type ByteRange } from './parse-lines.js';
import { openInboxFile } from './safe-open.js';
import type { Clock } from '../../clock.js';

/** Most bytes of appended growth parsed and committed as one part (bounds the part's items in memory). */
export const GROWTH_PART_BYTES = 8 * 1024 * 1024;

/** Most files watched for growth at once; past it the oldest watch ends early (logged). */
export const MAX_GROWTH_WATCHES = 1000;

/** Leading bytes of a file (or of its appended part) kept as `raw` of a file-level rejection. */
export const FILE_REJECTION_RAW_BYTES = 4096;

const CR = 0x0d;
const LF = 0x0a;

/** What a {@link GrowthWatch} needs of its files input. */
export interface GrowthWatchOptions {
  inputId: string;
  /** The watched folder (origins name files relative to it). */
  dir: string;
  format: 'lines' | 'csv' | 'ndjson' | 'json';
  stableMs: number;
  /** How long a moved file is watched after its last change, in ms. */
  watchMs: number;
  /** How often it is looked at, in ms. */
  pollMs: number;
  rememberFilesDays: number;
  sink: IntakeSink;
  ledger: IngestLedger;
  log: Logger;
  now: Clock;
  /** Parses bytes `range` of the open file in the input's format (all its items at once). */
  parse: (handle: FileHandle, ctx: FileParseContext, range: ByteRange) => Promise<IntakeItem[]>;
  /** Back-pressure: no part is stored while this answers true. */
  paused: () => boolean;
  maxReadLength: number;
  /** The input's `allowHardLinks`: a file of more than one name is watched only then. */
  allowHardLinks?: boolean;
}

interface Watched {
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

/**
 * Watches files after they were stored and moved to `processed/`, for a writer that was still
 * writing (it paused longer than `stableMs`, the file was taken, and it went on appending to the
 * moved file through its open handle). Such a file is looked at every `pollMs` until it has not
 * changed for `watchMs`. When it grew:
 *
 * - `lines`, `ndjson`, `csv`: once the growth has been still for `stableMs`, the appended complete
 *   lines are parsed (CSV with the file's header) and submitted as a part of their own, with their
 *   own content hash (SHA-256 of the file from its start up to the end of the part), recorded by
 *   the intake and the ledger like a file's, so a part is never stored twice. Line numbers go on
 *   from the file's. When the watch ends, a last line without a line break is taken too. If the
 *   file had been taken in the middle of a line, that whole line is stored as a rejection (its
 *   first part was already stored on its own).
 * - `json` (one array cannot be read in parts), or a part that cannot be parsed: an input-level
 *   rejection saying the file grew after it was taken and where it is.
 *
 * Every growth is logged as a warning: writers should write under a temporary name and rename,
 * or `stableMs` should be raised. The watch is in memory: after a restart, growth of files moved
 * before it is not looked at.
 */
export class GrowthWatch {
  private readonly watched = new Map<string, Watched>();
  private stopping = false;

  constructor(private readonly o: GrowthWatchOptions) {}

  /** Takes watches again after {@link stop} (the input was started again). */
  start(): void {
    this.stopping = false;
  }

  /** Starts watching a file just moved to `movedTo`, of which `taken` bytes are stored. */
  watch(movedTo: string, name: string, taken: number, mtimeMs: number): void {
    if (this.stopping) return;
    const w: Watched = {
      path: movedTo,
      name,
      taken,
      size: taken,
      mtimeMs,
      changedAt: Date.now(),
      timer: undefined,
      running: undefined,
      failures: 0,
      retryAt: 0,
    };
    if (this.watched.size >= MAX_GROWTH_WATCHES) {
      // Bounded: the oldest watch (Map order) ends early; a check in progress finishes.
      const oldest = this.watched.values().next().value;
      if (oldest) {
        this.o.log.warn(
          { file: oldest.name, path: oldest.path, watching: this.watched.size },
          `more than ${MAX_GROWTH_WATCHES} taken files watched for growth; the oldest watch ends early`,
        );
        this.end(oldest);
      }
    }
    this.watched.set(movedTo, w);
    this.schedule(w);
  }

  /** Files being watched (for tests and the log). */
  get size(): number {
    return this.watched.size;
  }

  /**
   * Ends every watch: waits for a check in progress, then stores what was appended and not yet
   * stored (complete lines as a part; a last incomplete line, or a `json` file's growth, as a
   * rejection), so stopping loses nothing that is on disk.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    const all = [...this.watched.values()];
    for (const w of all) clearTimeout(w.timer);
    await Promise.all(all.flatMap((w) => (w.running ? [w.running] : [])));
    for (const w of all) {
      try {
        await this.check(w, 'stopping');
      } catch (err) {
        this.o.log.error(
          { err, file: w.name, path: w.path },
          'cannot store the part appended to a file after it was taken',
        );
      }
    }
    this.watched.clear();
  }

  private schedule(w: Watched): void {
    w.timer = setTimeout(() => {
      w.timer = undefined;
      w.running = this.check(w, 'tick')
        .catch((err: unknown) =>
          this.o.log.error(
            { err, file: w.name, path: w.path },
            'checking a taken file for growth failed',
          ),
        )
        .finally(() => {
          w.running = undefined;
          if (!this.stopping && this.watched.get(w.path) === w) this.schedule(w);
        });
    }, this.o.pollMs);
  }

  private end(w: Watched): void {
    clearTimeout(w.timer);
    this.watched.delete(w.path);
  }

  private async check(w: Watched, mode: 'tick' | 'stopping'): Promise<void> {
    let opened;
    try {
      // The same safe open as the inbox's: replaced by a link or a FIFO, it is not read.
      opened = await openInboxFile(w.path, w.name, { allowHardLinks: this.o.allowHardLinks });
    } catch {
      // Moved away, deleted or replaced by someone: nothing more to watch.
      this.end(w);
      return;
    }
    try {
      await this.checkOpen(w, mode, opened.handle, opened.stats);
    } finally {
      await opened.handle.close();
    }
  }

  private async checkOpen(
    w: Watched,
    mode: 'tick' | 'stopping',
    handle: FileHandle,
    current: { size: number; mtimeMs: number },
  ): Promise<void> {
    const nowMs = Date.now();
    if (current.size !== w.size || current.mtimeMs !== w.mtimeMs) {
      w.size = current.size;
      w.mtimeMs = current.mtimeMs;
      w.changedAt = nowMs;
    }
    if (current.size < w.taken) {
      this.o.log.warn(
        { file: w.name, path: w.path, size: current.size, stored: w.taken },
        'a taken file was cut shorter after it was taken; not watched any longer',
      );
      this.end(w);
      return;
    }
    const quietMs = nowMs - w.changedAt;
    const expired = quietMs >= this.o.watchMs;
    if (current.size === w.taken) {
      if (expired && mode === 'tick') this.end(w);
      return;
    }
    if (mode === 'tick') {
      if (quietMs < this.o.stableMs || this.o.paused() || nowMs < w.retryAt) {
        if (expired && this.o.paused()) w.changedAt = nowMs - this.o.stableMs; // kept while paused
        return;
      }
    }
    const final = expired || mode === 'stopping';
    try {
      await this.storeGrowth(handle, w, current.size, final, mode === 'stopping');
      w.failures = 0;
    } catch (err) {
      w.failures += 1;
      w.retryAt = Date.now() + Math.min(30_000, 500 * 2 ** Math.min(w.failures, 10));
      w.changedAt = Math.max(w.changedAt, nowMs - this.o.watchMs + this.o.pollMs * 2); // not given up while refused
      this.o.log.error(
        { err, file: w.name, path: w.path },
        'buffer refused the part appended to a taken file; retrying',
      );
      if (mode === 'stopping') throw err;
    }
  }

  /** Stores bytes `[w.taken, size)`: complete lines as a part (all when `final`), or a rejection. */
  private async storeGrowth(
    handle: FileHandle,
    w: Watched,
    size: number,
    final: boolean,
    stopping: boolean,
  ): Promise<void> {
    const where = relative(this.o.dir, w.path);
    const advice =
      'write files under a temporary name (*.tmp) and rename them when complete, or raise stableMs';
    if (this.o.format === 'json') {
      const reason =
        `file grew by ${size - w.taken} bytes after it was taken (a JSON array cannot be read in parts): ` +
        `bytes ${w.taken}-${size} of ${where} were not stored; ${advice}`;
      await this.reject(handle, w, reason, w.taken, size, where);
      w.taken = size;
      return;
    }
    // Parts of at most GROWTH_PART_BYTES (ending at a line break), each parsed and committed on its
    // own: a writer appending a gigabyte does not make one array of it.
    while (size - w.taken > GROWTH_PART_BYTES) {
      const sliceEnd = await completeLinesEnd(handle, w.taken, w.taken + GROWTH_PART_BYTES);
      if (sliceEnd === undefined) break; // no line break in 8 MiB: one overlong line, taken below
      await this.storePart(handle, w, sliceEnd, where, advice);
    }
    const end = final && !stopping ? size : await completeLinesEnd(handle, w.taken, size);
    if (end !== undefined) await this.storePart(handle, w, end, where, advice);
    if (stopping && w.taken < size) {
      const reason = `file grew after it was taken and the gateway stopped before its last line was complete: bytes ${w.taken}-${size} of ${where} were not stored; ${advice}`;
      await this.reject(handle, w, reason, w.taken, size, where);
      w.taken = size;
    }
  }

  /** Parses and submits bytes `[w.taken, end)` (complete lines) as a part of their own. */
  private async storePart(
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
    const receivedAt = new Date(this.o.now());
    const earlier = this.o.rememberFilesDays > 0 ? this.o.ledger.find(sha256) : undefined;
    if (earlier) {
      w.taken = end;
      return;
    }
    const ctx: FileParseContext = {
      inputId: this.o.inputId,
      fileName: w.name,
      receivedAt,
      maxReadLength: this.o.maxReadLength,
      sha256,
    };
    let items: IntakeItem[];
    try {
      items = await this.o.parse(handle, ctx, { start, end, firstLine });
    } catch (err) {
      if (!isGatewayError(err)) throw err;
      const reason = `file grew after it was taken and the appended part cannot be read: ${err.message}; bytes ${w.taken}-${end} of ${where} were not stored; ${advice}`;
      await this.reject(handle, w, reason, w.taken, end, where);
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
        inputId: this.o.inputId,
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
      if (this.o.rememberFilesDays > 0)
        await this.o.sink.submit(items, { fileHash: sha256, fileName: w.name });
      else await this.o.sink.submit(items);
    }
    const rejections = items.reduce((n, item) => n + (item.kind === 'rejection' ? 1 : 0), 0);
    this.o.log.warn(
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
    if (this.o.rememberFilesDays > 0) {
      await this.o.ledger
        .record(sha256, `${w.name} (bytes ${w.taken}-${end}, appended)`)
        .catch((err: unknown) =>
          this.o.log.warn({ err, file: w.name }, 'cannot write the ingested-files ledger'),
        );
    }
    w.taken = end;
  }

  private async reject(
    handle: FileHandle,
    w: Watched,
    reason: string,
    from: number,
    to: number,
    where: string,
  ): Promise<void> {
    const raw = await readRange(handle, from, Math.min(to, from + FILE_REJECTION_RAW_BYTES));
    const rejection: InputRejection = {
      inputId: this.o.inputId,
      raw,
      receivedAt: new Date(this.o.now()),
      reason,
      origin: { file: w.name, movedTo: where, from, to },
    };
    await this.o.sink.submit([{ kind: 'rejection', rejection }]);
    this.o.log.warn({ file: w.name, path: w.path, from, to }, reason);
  }
}

/** Bytes `[start, end)` of an open file (for small ranges). */
export async function readRange(handle: FileHandle, start: number, end: number): Promise<Buffer> {
  if (end <= start) return Buffer.alloc(0);
  const buffer = Buffer.alloc(end - start);
  const { bytesRead } = await handle.read(buffer, 0, end - start, start);
  return buffer.subarray(0, bytesRead);
}

/** SHA-256 (hex) of bytes `[start, end)` of an open file; streamed (memory: one 64 KiB block). */
export async function hashRange(handle: FileHandle, start: number, end: number): Promise<string> {
  const hash = createHash('sha256');
  for await (const block of readBlocks(handle, start, end, 256 * 1024, true)) hash.update(block);
  return hash.digest('hex');
}

/**
 * The offset just after the last line break in `[from, to)`, or undefined when there is none. A
 * CR as the very last byte does not count (its LF may still come).
 */
export async function completeLinesEnd(
  handle: FileHandle,
  from: number,
  to: number,
): Promise<number | undefined> {
  const block = 64 * 1024;
  for (let high = to; high > from; high -= block) {
    const low = Math.max(from, high - block);
    const buffer = Buffer.alloc(high - low);
    const { bytesRead } = await handle.read(buffer, 0, high - low, low);
    for (let i = bytesRead - 1; i >= 0; i--) {
      const byte = buffer[i];
      if (byte === LF) return low + i + 1;
      if (byte === CR && low + i !== to - 1) return low + i + 1;
    }
  }
  return undefined;
}
