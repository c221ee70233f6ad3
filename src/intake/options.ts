import type { Logger } from '../log.js';
import type { MappingContext } from '../mapping/map-read.js';
import type { BufferStore } from '../buffer/store.js';
import type { Clock } from '../clock.js';
import type { IntakeFence } from './fence.js';

/** What intake needs of back-pressure (src/buffer/back-pressure.ts): the quota and full-disk gate of its admission. */
export interface IntakeGate {
  /** Answers why a commit adding these scans is refused, or undefined when it fits. */
  admit(scans: number, bytes: number): string | undefined;
  /** Why one submit alone can never fit the quota, or undefined. */
  tooLarge?(scans: number, bytes: number): string | undefined;
  /**
   * Why nothing may be written now (the disk is full), or undefined. Every submit is then
   * refused with `SCANGW_E_BUFFER_DISK_FULL` (retryable), as a commit failing with SQLITE_FULL is.
   */
  writesRefused?(): string | undefined;
  /** Called once before the admits of one group commit; ended by commitFailed or commitSucceeded. */
  beginGroup?(): void;
  commitFailed(err: unknown): void;
  commitSucceeded(): void;
}

export interface IntakeOptions {
  /** The buffer; opened before {@link Intake.open}. */
  store: BufferStore;
  mapping: MappingContext;
  logger: Logger;
  /** Called after each commit that added scans, so delivery can wake up. */
  onScansCommitted?: () => void;
  now?: Clock;
  /**
   * Longest a submit waits for others to share its transaction, in ms. Default 0: a group is what
   * was submitted in the same turn of the event loop, committed at its end (setImmediate); under
   * load the next group gathers while a commit runs, so groups grow with the load by themselves.
   * A fixed window of 2 ms was most of the publish-to-PUBACK time at 1,000 MQTT messages/s.
   */
  groupWindowMs?: number;
  /**
   * The turn to write the buffer beside another connection (delivery's batch thread:
   * `Deliverer.threadWriting`, src/delivery/write-turn.ts): undefined when the group may commit
   * now, else a promise settled when it may. A group waits for it, at most
   * {@link INTAKE_WRITER_WAIT_MS}, so the event loop serves other work meanwhile instead of
   * sleeping in SQLite's busy handler until the other transaction ends.
   */
  otherWriter?: () => Promise<void> | undefined;
  /**
   * Longest a group waits for {@link otherWriter}, ms; default {@link INTAKE_WRITER_WAIT_MS}. A
   * test that looks at a group while it waits sets it long, so what it asserts does not depend on
   * how soon a loaded machine runs the event loop.
   */
  otherWriterWaitMs?: number;
  /** Quota and full-disk handling; without it every commit is attempted. */
  gate?: IntakeGate;
  /**
   * High availability: reads are committed only while this node leads within its lease, stored
   * with its epoch, and a message the broker sent again (DUP) is stored as a possible duplicate
   * (the previous leader may have committed it). Without it (no `ha`) every commit is attempted.
   */
  fence?: IntakeFence;
  /**
   * Cuts known secrets out of a reason before it is stored (a refusal may quote the input, and
   * the input may hold a secret). The raw read is kept as received: it is the evidence.
   */
  scrub?: (text: string) => string;
}

/**
 * The longest a group waits for another connection's write ({@link IntakeOptions.otherWriter})
 * before it commits anyway (SQLite's busy handler then waits for the lock as without the wait), ms.
 * A write transaction of the batch thread (a step of a batch) takes a few ms; this only bounds
 * one that hangs.
 */
export const INTAKE_WRITER_WAIT_MS = 250;
