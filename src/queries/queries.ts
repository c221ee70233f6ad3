import { ErrorCodes, GatewayError } from '../errors.js';
import type { BufferStore } from '../buffer/store.js';
import { BufferReader } from './reader.js';
import { BufferReports } from './reports.js';

/**
 * The daemon's questions to its buffer (status, health page, metrics, item lookup, the station
 * screen), asked on a read-only connection of their own: they cannot write the outbox, and a
 * long question does not hold the store's connection. Opened after the store (which creates and
 * migrates the file), closed before it.
 *
 * A buffer in memory (`:memory:`, tests and trials) cannot be opened twice: its questions are
 * asked on the store's connection, which then must be open first.
 *
 * The constructor does no I/O; {@link open} opens.
 */
export class BufferQueries {
  private reader: Pick<BufferReader, 'reports' | 'close'> | undefined;

  constructor(private readonly store: Pick<BufferStore, 'path' | 'memoryConnection'>) {}

  /** The buffer's file. */
  get path(): string {
    return this.store.path;
  }

  /**
   * Opens the buffer at {@link path} read-only (see {@link BufferReader}); nothing is done when it
   * is open already.
   *
   * @throws GatewayError what {@link BufferReader}'s constructor throws; `SCANGW_E_NOT_RUNNING`
   *   for a buffer in memory whose store is not open.
   */
  open(): void {
    if (this.reader !== undefined) return;
    if (this.path === ':memory:') {
      const reports = new BufferReports(this.store.memoryConnection(), this.path);
      this.reader = { reports, close: () => undefined };
    } else this.reader = new BufferReader(this.path);
  }

  /** True from {@link open} until {@link close}. */
  get isOpen(): boolean {
    return this.reader !== undefined;
  }

  /**
   * The questions (reports.ts), from {@link open} until {@link close}.
   *
   * @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open.
   */
  get reports(): BufferReports {
    if (this.reader === undefined)
      throw new GatewayError(
        ErrorCodes.NOT_RUNNING,
        `the buffer's queries on ${this.path} are not open (they are there from open() until close())`,
      );
    return this.reader.reports;
  }

  /** Closes the connection; nothing is done when it is not open. */
  close(): void {
    this.reader?.close();
    this.reader = undefined;
  }
}
