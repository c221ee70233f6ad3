import { lstat, readlink, type FileHandle } from 'node:fs/promises';
import { basename, relative } from 'node:path';
import { isGatewayError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { InputRejection, IntakeSink } from '../types.js';
import { FILE_REJECTION_RAW_BYTES, readRange } from './file-growth.js';
import { failedTarget, moveToFailed, processedTarget } from './file-moves.js';
import type { FileEntry, TakeOutcome } from './file-queue.js';
import type { Clock } from '../../clock.js';

/** File-system errors that mean "this file cannot be read", as opposed to a passing I/O fault. */
const UNREADABLE_CODES = new Set(['EACCES', 'EPERM', 'EISDIR', 'ELOOP', 'ENAMETOOLONG', 'EFBIG']);

/** What {@link FileRejects} needs: narrow parts of the input, no more. */
export interface FileRejectsOptions {
  /** The input's id (in each rejection). */
  inputId: string;
  /** The watched folder, absolute and normalised (`processed/` and `failed/` are under it). */
  dir: string;
  sink: IntakeSink;
  log: Logger;
  /** Clock for a rejection's `receivedAt` and the `processed/YYYY-MM-DD` folder. */
  now: Clock;
  /** Cuts known secrets out of the `failed/*.error.txt` text. */
  scrub: ((text: string) => string) | undefined;
}

/**
 * The rejections of whole files: a file that cannot be taken (no regular file, over
 * `maxFileBytes`, unreadable, unparsable) and a file whose content was stored before. Each is
 * first committed as one input-level rejection with the file's first
 * {@link FILE_REJECTION_RAW_BYTES} bytes and the reason (counted, listed by `failures`), then
 * moved: to `failed/` with a `<name>.error.txt`, or to `processed/`. When the buffer refuses the
 * rejection the file stays in the folder and the answer is `retry`: nothing is moved uncounted.
 */
export class FileRejects {
  private readonly id: string;
  private readonly dir: string;
  private readonly sink: IntakeSink;
  private readonly log: Logger;
  private readonly now: Clock;
  private readonly scrub: ((text: string) => string) | undefined;

  constructor(options: FileRejectsOptions) {
    this.id = options.inputId;
    this.dir = options.dir;
    this.sink = options.sink;
    this.log = options.log;
    this.now = options.now;
    this.scrub = options.scrub;
  }

  /**
   * Content stored before (ledger): counted as a rejection naming the earlier file (not submitted
   * with the hash, which the intake would drop as the earlier file's), then moved to processed/.
   * Answers `committed` (only the move to processed/ is left: the caller's) or `retry` (the buffer
   * refused the rejection). Throws what finding a free name in processed/ throws.
   */
  async seenBefore(
    entry: FileEntry,
    sha256: string,
    earlier: { at: string; name: string },
    receivedAt: Date,
    handle: FileHandle,
  ): Promise<TakeOutcome | 'committed'> {
    const name = basename(entry.path);
    const reason = `same content as ${earlier.name} stored at ${earlier.at}; not stored again`;
    entry.target ??= await processedTarget(entry.path, this.dir, new Date(this.now()));
    const origin = { file: name, sha256, movedTo: relative(this.dir, entry.target) };
    const raw = await readRange(handle, 0, FILE_REJECTION_RAW_BYTES).catch(() => Buffer.alloc(0));
    if (
      !(await this.commitFileRejection(
        entry.path,
        raw,
        reason,
        origin,
        receivedAt,
        'the note of a file stored before',
      ))
    )
      return 'retry';
    this.log.warn(
      { file: name, sha256, ingestedAt: earlier.at, as: earlier.name },
      'file with this content was ingested before; not ingested again (counted as a rejection)',
    );
    entry.committed = true;
    return 'committed';
  }

  /**
   * A file that cannot be taken: to failed/ with the reason (after its rejection is committed).
   * `handle`: the file opened (its first bytes go in the rejection); none for an entry that is not
   * a regular file (nothing of it is read). `stored`: items of it committed before the failure
   * (chunks before a broken CSV record): they stay stored, and the reason says so.
   * Answers `done` (moved to failed/, or the file is gone) or `retry` (a passing I/O fault, or the
   * buffer refused the rejection, or failed/ cannot be used).
   */
  async cannotTake(
    entry: FileEntry,
    err: unknown,
    handle?: FileHandle,
    stored = 0,
  ): Promise<TakeOutcome> {
    const name = basename(entry.path);
    const code = (err as NodeJS.ErrnoException).code;
    let reason: string;
    if (code === 'ENOENT') {
      const dangling = await danglingLink(entry.path);
      if (dangling === undefined) {
        this.log.info({ file: name }, 'file removed before it was read');
        return 'done';
      }
      reason = dangling;
    } else if (!isGatewayError(err) && !(code !== undefined && UNREADABLE_CODES.has(code))) {
      this.log.warn({ err, file: name }, 'reading file failed; retrying');
      return 'retry';
    } else {
      reason = err instanceof Error ? err.message : String(err);
    }
    if (stored > 0)
      reason += `; the file's first ${stored} items (reads and rejected rows) were stored before this and stay stored`;
    // Counted and inspectable: an input-level rejection with the file's first bytes, committed
    // before the file moves to failed/ (if the buffer refuses, the file stays and is retried).
    let target: string;
    try {
      target = await failedTarget(entry.path, this.dir);
    } catch (targetErr) {
      this.log.error(
        { err: targetErr, file: name, reason },
        'file cannot be taken and failed/ cannot be used; retrying',
      );
      return 'retry';
    }
    const origin = { file: name, movedTo: relative(this.dir, target) };
    const raw = handle
      ? await readRange(handle, 0, FILE_REJECTION_RAW_BYTES).catch(() => Buffer.alloc(0))
      : Buffer.alloc(0);
    if (
      !(await this.commitFileRejection(
        entry.path,
        raw,
        reason,
        origin,
        new Date(this.now()),
        'the rejection of a file that cannot be taken',
      ))
    )
      return 'retry';
    entry.failure = { reason, target, stored };
    return this.moveFailed(entry, reason, target, stored);
  }

  /**
   * Commits one input-level rejection for a whole file (its first bytes, the reason, where it goes),
   * so it is counted and listed by `failures` before the file moves. Answers false when the buffer
   * refused it: the file then stays in the folder and is retried.
   */
  private async commitFileRejection(
    path: string,
    raw: Buffer,
    reason: string,
    origin: Record<string, string>,
    receivedAt: Date,
    what: string,
  ): Promise<boolean> {
    const rejection: InputRejection = { inputId: this.id, raw, receivedAt, reason, origin };
    try {
      await this.sink.submit([{ kind: 'rejection', rejection }]);
      return true;
    } catch (err) {
      this.log.error(
        { err, file: basename(path), reason },
        `buffer refused ${what}; it stays in the folder and is retried`,
      );
      return false;
    }
  }

  /**
   * Moves a file whose rejection is committed to `failed/` (`target`), beside a
   * `<name>.error.txt` giving `reason` and the `stored` items (reads and rejected rows) committed
   * before the failure. Always answers `done`: a file that cannot be moved stays in place (its
   * rejection is stored) and is tried again on its next change or the next start.
   */
  async moveFailed(
    entry: FileEntry,
    reason: string,
    target: string,
    stored = 0,
  ): Promise<TakeOutcome> {
    const name = basename(entry.path);
    try {
      const to = await moveToFailed(
        entry.path,
        this.dir,
        reason,
        { inputId: this.id, at: new Date(this.now()), scrub: this.scrub, stored },
        target,
      );
      this.log.warn(
        { file: name, reason, to },
        'file cannot be taken; moved to failed/ (stored as a rejection)',
      );
    } catch (moveErr) {
      // Left in place (its rejection is stored): a later change to the file, or the next start,
      // tries it again.
      this.log.error(
        { err: moveErr, file: name, reason },
        'file cannot be taken and cannot be moved to failed/',
      );
    }
    return 'done';
  }
}

/** The reason for a dangling symbolic link at `path`, or undefined when it is not one. */
async function danglingLink(path: string): Promise<string | undefined> {
  try {
    if (!(await lstat(path)).isSymbolicLink()) return undefined;
    return `symbolic link to ${await readlink(path)}, which does not exist (or cannot be reached)`;
  } catch {
    return undefined;
  }
}
