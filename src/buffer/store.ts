import type Database from 'better-sqlite3';
import { ErrorCodes, GatewayError } from '../errors.js';
import { Batches } from './batches.js';
import { IntakeWrites } from './intake-writes.js';
import { ContainerRecords } from './containers.js';
import { openBuffer, type OpenOptions } from './open.js';
import { EventPositions } from './positions.js';
import { Pruning } from './pruning.js';
import { DeadLetters } from './replay.js';
import { OutboxCounts } from './outbox-counts.js';
import { ScanInsert } from './scan-insert.js';
import { BufferSpace } from './space.js';

export type {
  IntakeRecord,
  CommittedFile,
  CommittedMessage,
  BatchMode,
  BatchState,
  BatchRow,
  BufferTotals,
  PendingHead,
  PendingSpan,
  PendingScanRow,
  StoredRead,
} from './rows.js';
export { arrayBytes } from './rows.js';
export type { OpenOptions } from './open.js';

/** The parts of an open buffer, one job each, all on the store's one connection. */
interface Facets {
  readonly intake: IntakeWrites;
  readonly containers: ContainerRecords;
  readonly batches: Batches;
  readonly positions: EventPositions;
  readonly reports: OutboxCounts;
  readonly pruning: Pruning;
  readonly space: BufferSpace;
  readonly deadLetters: DeadLetters;
}

/**
 * The durable buffer: an outbox in SQLite (WAL, `synchronous=FULL`). Every read is written before
 * its source is acknowledged; scans leave the outbox only when upstream reports them processed,
 * and even then stay for audit until retention prunes them (retention.ts).
 *
 * The store owns the connection and nothing else: what is done with it is split by concern into
 * classes built on it when it opens, each with its statements prepared once:
 * - {@link intake}: intake's commits and what it asks before one (intake-writes.ts);
 * - {@link batches}: delivery's pending scans and batches (batches.ts);
 * - {@link positions}: where the status-event topic's reading stands (positions.ts);
 * - {@link reports}: the outbox's own counts, asked inside its transactions (outbox-counts.ts);
 * - {@link pruning}: the deletes of retention and of early pruning (pruning.ts);
 * - {@link space}: the file as room on its disk, for the disk guard and back-pressure (space.ts);
 * - {@link deadLetters}: replay of dead letters (replay.ts).
 * The connection never leaves `src/buffer/` (but for a buffer in memory: see
 * {@link memoryConnection}). The questions people ask (status, lookups, the
 * station screen, the operations commands) are answered by `src/queries/` on a read-only
 * connection of its own.
 *
 * The constructor does no I/O; {@link open} opens. A second process (the `replay` command) may
 * open the same file while the daemon runs: WAL lets readers go on, and `busy_timeout` makes
 * writers wait for each other instead of failing.
 *
 * `options.migrate: false` (a second process beside the daemon): a buffer of an older schema is
 * refused instead of migrated, because a migration may change what the running (older) daemon
 * writes: since version 12, `scans` is a view it cannot insert into.
 */
export class BufferStore {
  private connection: Database.Database | undefined;
  private facets: Facets | undefined;

  /** Only keeps its arguments: {@link open} (or {@link openAt}) opens the file. */
  constructor(
    readonly path: string,
    private readonly options: OpenOptions = {},
  ) {}

  /** A store opened at once (`new BufferStore(path, options)` then {@link open}): for the CLI and tests. */
  static openAt(path: string, options: OpenOptions = {}): BufferStore {
    const store = new BufferStore(path, options);
    store.open();
    return store;
  }

  /**
   * Opens the file (creating it and its folder unless `fileMustExist`), migrates its schema,
   * checks that it can be written (unless `readonly`) and prepares the statements of its parts.
   * Nothing is done when it is open already.
   *
   * @throws GatewayError `SCANGW_E_BUFFER` when the file cannot be opened, migrated or written (a
   *   file the gateway's user may not write: the message names the user and what to chown);
   *   `SCANGW_E_BUFFER_UNOPENABLE` when it needs a person (not a database, a schema newer than
   *   this gateway, an older one with `migrate: false`, no permission);
   *   `SCANGW_E_BUFFER_DISK_FULL` when a migration ran out of disk space (undone whole).
   */
  open(): void {
    if (this.isOpen) return;
    const db = openBuffer(this.path, this.options);
    const scans = new ScanInsert(db);
    try {
      const containers = new ContainerRecords(db);
      this.facets = {
        intake: new IntakeWrites(db, this.path, scans, containers),
        containers,
        batches: new Batches(db),
        positions: new EventPositions(db),
        reports: new OutboxCounts(db),
        pruning: new Pruning(db),
        space: new BufferSpace(db),
        deadLetters: new DeadLetters(db, scans),
      };
    } catch (err) {
      db.close();
      throw err;
    }
    this.connection = db;
  }

  /** True from {@link open} until {@link close} (false after a failed open). */
  get isOpen(): boolean {
    return this.connection?.open ?? false;
  }

  private facet<K extends keyof Facets>(name: K): Facets[K] {
    this.openConnection(`store.${name}`);
    return this.facets![name];
  }

  private openConnection(what: string): Database.Database {
    if (!this.connection?.open)
      throw new GatewayError(
        ErrorCodes.NOT_RUNNING,
        `the buffer ${this.path} is not open (${what} is there from open() until close())`,
      );
    return this.connection;
  }

  /** Intake's commits and what it asks before one (intake-writes.ts). @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open. */
  get intake(): IntakeWrites {
    return this.facet('intake');
  }

  /** The containers kept: open ones to restore, closed ones with how they ended (containers.ts). @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open. */
  get containers(): ContainerRecords {
    return this.facet('containers');
  }

  /** Delivery's pending scans and batches (batches.ts). @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open. */
  get batches(): Batches {
    return this.facet('batches');
  }

  /** Status events: the topic's positions (positions.ts). @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open. */
  get positions(): EventPositions {
    return this.facet('positions');
  }

  /** The outbox's own counts: undelivered totals, scans by state, uploads sent twice (outbox-counts.ts). @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open. */
  get reports(): OutboxCounts {
    return this.facet('reports');
  }

  /** Retention's and early pruning's deletes (pruning.ts). @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open. */
  get pruning(): Pruning {
    return this.facet('pruning');
  }

  /** The file as room on its disk (space.ts). @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open. */
  get space(): BufferSpace {
    return this.facet('space');
  }

  /** Dead letters and their replay (replay.ts). @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open. */
  get deadLetters(): DeadLetters {
    return this.facet('deadLetters');
  }

  /**
   * The connection of a buffer in memory, for its read-only questions (src/queries/queries.ts)
   * alone: `:memory:` cannot be opened a second time. A buffer in a file is never handed out.
   *
   * @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open or not in memory.
   */
  memoryConnection(): Database.Database {
    if (this.path !== ':memory:')
      throw new GatewayError(
        ErrorCodes.NOT_RUNNING,
        `the buffer ${this.path} is a file: its questions open a read-only connection of their own`,
      );
    return this.openConnection('store.memoryConnection');
  }

  /**
   * Runs `fn` in one transaction (a savepoint when nested), across the parts: a read through
   * `batches.pendingScans` and the `batches.writeBatch` that follows it see the same buffer; the
   * effect of status events and their positions commit together. `fn` must be synchronous.
   *
   * Every write transaction of the buffer begins IMMEDIATE: it takes the write lock before its
   * first read. A second writer on the file (`scan-gateway replay`) then waits for it
   * (`busy_timeout`) instead of committing between its read and its write, which would fail
   * the daemon's write with SQLITE_BUSY_SNAPSHOT (a WAL reader cannot write from a stale
   * snapshot, and no busy handler helps that).
   *
   * @throws GatewayError `SCANGW_E_NOT_RUNNING` when not open; whatever `fn` throws (rolled back).
   */
  atomically<T>(fn: () => T): T {
    return this.openConnection('store.atomically').transaction(fn).immediate();
  }

  /** Closes the connection; nothing is done when it is not open. Its parts fail from then on. */
  close(): void {
    if (this.connection?.open) this.connection.close();
  }
}
