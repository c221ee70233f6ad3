import { ErrorCodes, GatewayError } from '../../errors.js';
import type { IntakeItem, IntakeSink, SubmitResult } from '../types.js';

/**
 * What the files input asks of the sink beyond {@link IntakeSink.submit}: a file's content hash
 * (and, for a file committed in chunks, how far it is committed) recorded in the same SQLite
 * transaction as its items, so a file read again after a crash (between a commit and the move to
 * `processed/`) is neither lost nor stored twice. The gateway's intake (src/intake/intake.ts)
 * implements it.
 */
export interface FileSink extends IntakeSink {
  /**
   * Commits items that make a whole (a part a file grew by after it was taken) with the file's
   * record: its hash and name, in the same transaction as the items. A later submit with the same
   * hash (read again after a crash between the commit and the move) resolves at once, with the
   * items' outcomes, and stores nothing. The record's input is the first item's: a submit of no
   * items records nothing.
   */
  submitFile(items: IntakeItem[], file: FileRecord): Promise<SubmitResult | void>;
  /** Commits one chunk of a file committed in parts, with the file's progress; see {@link FileChunk}. */
  submitChunk(items: IntakeItem[], chunk: FileChunk): Promise<SubmitResult | void>;
  /**
   * How far a file with this content is committed: complete (recorded by its hash), or the items
   * of a file in progress; undefined when none of it is.
   */
  fileProgress(inputId: string, hash: string): FileProgress | undefined;
}

/** The file a submit's items came from (a {@link FileSink.submitFile}). */
export interface FileRecord {
  /** SHA-256 (hex) of the file's content. */
  hash: string;
  /** The file's name, for the record and the log. */
  name: string;
}

/**
 * A chunk of a file committed in parts: the intake records the file's progress (items committed so
 * far) in the same transaction as the chunk's rows, so after a crash the file goes on after its last
 * committed chunk. A chunk already committed (by its progress) is acknowledged without storing it
 * again. A chunk of no items with `final` marks the file complete.
 */
export interface FileChunk {
  inputId: string;
  /** SHA-256 (hex) of the file's content. */
  hash: string;
  name: string;
  /** Items of the file committed before this chunk. */
  itemsBefore: number;
  /** The file's last chunk: the file is then complete (recorded in `files` when `remember`). */
  final: boolean;
  /** Record the complete file by its hash, so the same content is not stored again (rememberFilesDays > 0). */
  remember: boolean;
}

/** How far a file is committed (from {@link FileSink.fileProgress}). */
export interface FileProgress {
  /** Items committed so far. */
  items: number;
  /** Its last chunk is committed (and the file recorded by its hash). */
  complete: boolean;
}

/**
 * The sink a files input was given, as the {@link FileSink} it needs.
 *
 * @throws GatewayError `SCANGW_E_INTERNAL` when the sink records no files (a bug: the gateway's
 *   intake does; a sink that did not would give up the files input's exactly-once storing).
 */
export function fileSinkOf(sink: IntakeSink, inputId: string): FileSink {
  const s = sink as Partial<FileSink>;
  if (
    typeof s.submitFile === 'function' &&
    typeof s.submitChunk === 'function' &&
    typeof s.fileProgress === 'function'
  )
    return sink as FileSink;
  throw new GatewayError(
    ErrorCodes.INTERNAL,
    `files input ${inputId}: its sink records no files (submitFile, submitChunk, fileProgress)`,
  );
}
