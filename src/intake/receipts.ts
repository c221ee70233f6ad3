import type { IntakeWrites } from '../buffer/intake-writes.js';
import type { CommittedFile, CommittedMessage, IntakeRecord } from '../buffer/store.js';
import type { FileChunk, FileProgress, FileRecord } from '../inputs/files/file-sink.js';
import type { MqttMessage } from '../inputs/mqtt/message-sink.js';
import type { IntakeItem } from '../inputs/types.js';
import type { Logger } from '../log.js';
import type { TakenReference } from './duplicates.js';
import { outcomesOf, type Pending, type Verdict } from './records.js';

/**
 * The receipts of submits: what a kind's source needs recorded in the same transaction as its
 * items (a file's hash or a file's progress, through the files input's `FileSink`; an MQTT
 * message's identity, through the MQTT input's `MessageSink`), so that the source's sending it
 * again after a crash resolves without storing it twice.
 */
export type Receipt = Pick<Pending, 'file' | 'message' | 'chunk'>;

/** The input of a submit's first item (a receipt's input; submits of one input keep their order). */
export function inputIdOf(items: readonly IntakeItem[]): string | undefined {
  const first = items[0];
  if (first === undefined) return undefined;
  return first.kind === 'read' ? first.read.inputId : first.rejection.inputId;
}

/** The receipt of a whole file's items: none for no items (the record's input is the first item's). */
export function fileReceipt(items: readonly IntakeItem[], file: FileRecord): Receipt {
  const inputId = inputIdOf(items);
  return inputId === undefined ? {} : { file: { inputId, hash: file.hash, name: file.name } };
}

/** The receipt of a message's items: none for no items (the identity's input is the first item's). */
export function messageReceipt(items: readonly IntakeItem[], message: MqttMessage): Receipt {
  const inputId = inputIdOf(items);
  // A copy: the input may change its own `dup` after this submit.
  return inputId === undefined ? {} : { message: { inputId, ...message } };
}

/** The receipt of a file's chunk (its own input: a final chunk may have no items). */
export function chunkReceipt(chunk: FileChunk): Receipt {
  return { chunk };
}

/** What {@link settledBefore} needs of intake. */
export interface SettleDeps {
  writes: IntakeWrites;
  logger: Logger;
  verdicts: WeakMap<IntakeRecord, Verdict>;
  /** Gives back the duplicate window's references a submit took. */
  forget: (taken: TakenReference[]) => void;
  /** Counts an MQTT resend acknowledged only. */
  countRedelivered: (inputId: string) => void;
}

/**
 * Resolves a submit whose receipt was committed before, and answers whether it did: the broker's
 * resend of a message committed before whose PUBACK it never had (`redelivered`, no outcomes), a
 * file (or a file's chunk) committed before a crash came between the commit and the file's move
 * (its items' outcomes). Such a submit is acknowledged only: nothing of it is stored.
 */
export function settledBefore(p: Pending, deps: SettleDeps): boolean {
  const { writes, logger } = deps;
  if (p.message?.dup && writes.knownMessage(p.message)) {
    deps.forget(p.taken);
    deps.countRedelivered(p.message.inputId);
    p.resolve({ outcomes: [], redelivered: true });
    return true;
  }
  if (p.file && writes.knownFile(p.file.inputId, p.file.hash)) {
    deps.forget(p.taken);
    logger.warn(
      { inputId: p.file.inputId, file: p.file.name, hash: p.file.hash },
      'file with this content was stored before; not stored again',
    );
    p.resolve(outcomesOf(p, deps.verdicts));
    return true;
  }
  if (chunkCommittedBefore(p, writes)) {
    deps.forget(p.taken);
    logger.warn(
      { inputId: p.chunk?.inputId, file: p.chunk?.name, hash: p.chunk?.hash },
      'chunk of a file was stored before; not stored again',
    );
    p.resolve(outcomesOf(p, deps.verdicts));
    return true;
  }
  return false;
}

/** A chunk committed before (by the file's progress, or the whole file): acknowledged, not stored again. */
function chunkCommittedBefore(p: Pending, writes: IntakeWrites): boolean {
  const c = p.chunk;
  if (!c) return false;
  if (c.remember && writes.knownFile(c.inputId, c.hash)) return true;
  return (
    p.records.length > 0 &&
    (writes.fileProgress(c.inputId, c.hash) ?? 0) >= c.itemsBefore + p.records.length
  );
}

/** The files (and files' chunks) a group commits, each with its items counted so far. */
export function committedFiles(group: readonly Pending[]): CommittedFile[] {
  return group.flatMap((p): CommittedFile[] => {
    if (p.file) return [{ ...p.file, items: p.records.length }];
    const c = p.chunk;
    if (!c) return [];
    return [
      {
        inputId: c.inputId,
        hash: c.hash,
        name: c.name,
        items: c.itemsBefore + p.records.length,
        inProgress: !c.final,
        remember: c.remember,
      },
    ];
  });
}

/** The message identities a group commits. */
export function committedMessages(group: readonly Pending[]): CommittedMessage[] {
  return group.flatMap((p) => (p.message ? [p.message] : []));
}

/** How far a file with this content is committed: complete (in `files`), or items of a file in progress. */
export function fileProgressIn(
  writes: IntakeWrites,
  inputId: string,
  hash: string,
): FileProgress | undefined {
  if (writes.knownFile(inputId, hash)) return { items: 0, complete: true };
  const items = writes.fileProgress(inputId, hash);
  return items === undefined ? undefined : { items, complete: false };
}
