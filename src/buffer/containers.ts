import type Database from 'better-sqlite3';
import type { ContainerRow } from './rows.js';

const COLUMNS = `container, per, station, parent, opened_at AS openedAt, last_read_at AS lastReadAt, members,
  expected, state, closed_at AS closedAt, why, closed_by AS "by", member_refs AS memberRefs`;

type Stored = Omit<ContainerRow, 'memberRefs' | 'expected' | 'closedAt' | 'why' | 'by'> & {
  expected: number | null;
  closedAt: string | null;
  why: string | null;
  by: string | null;
  memberRefs: string | null;
};

function toRow(r: Stored): ContainerRow {
  let refs: string[] | undefined;
  try {
    const parsed: unknown = r.memberRefs === null ? undefined : JSON.parse(r.memberRefs);
    if (Array.isArray(parsed)) refs = parsed.filter((x): x is string => typeof x === 'string');
  } catch {
    refs = undefined;
  }
  return {
    container: r.container,
    per: r.per,
    station: r.station,
    parent: r.parent,
    openedAt: r.openedAt,
    lastReadAt: r.lastReadAt,
    members: r.members,
    ...(r.expected !== null ? { expected: r.expected } : {}),
    state: r.state,
    ...(r.closedAt !== null ? { closedAt: r.closedAt } : {}),
    ...(r.why !== null ? { why: r.why } : {}),
    ...(r.by !== null ? { by: r.by } : {}),
    ...(refs ? { memberRefs: refs } : {}),
  };
}

/**
 * The containers the buffer keeps (table `containers`): the open ones, restored at
 * start (src/app.ts hands them to the mapping), and the closed ones with how they ended, for
 * `trace`, the page's problem of incomplete containers and the metric. Intake writes a read's
 * changes in its own transaction ({@link write} from `IntakeWrites.commitIntake`); a supervisor's
 * close is written alone. Every statement is prepared once, here.
 */
export class ContainerRecords {
  private readonly upsert: Database.Statement;
  private readonly openRows: Database.Statement;
  private readonly ofParent: Database.Statement;
  private readonly closedSince: Database.Statement;
  private readonly byState: Database.Statement;
  private readonly forget: Database.Statement;

  constructor(private readonly db: Database.Database) {
    this.upsert = db.prepare(
      `INSERT INTO containers (container, per, station, parent, opened_at, last_read_at, members, expected, state, closed_at, why, closed_by, member_refs)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (container, station, opened_at) DO UPDATE SET
         last_read_at = excluded.last_read_at, members = excluded.members, expected = excluded.expected,
         state = excluded.state, closed_at = excluded.closed_at, why = excluded.why,
         closed_by = excluded.closed_by, member_refs = excluded.member_refs`,
    );
    this.openRows = db.prepare(
      `SELECT ${COLUMNS} FROM containers WHERE state = 'open' ORDER BY id`,
    );
    this.ofParent = db.prepare(
      `SELECT ${COLUMNS} FROM containers WHERE parent = ? ORDER BY id LIMIT 50`,
    );
    this.closedSince = db.prepare(
      `SELECT ${COLUMNS} FROM containers WHERE state = ? AND closed_at >= ? ORDER BY closed_at DESC LIMIT ?`,
    );
    this.byState = db.prepare(
      `SELECT container, state, count(*) AS n FROM containers GROUP BY container, state`,
    );
    this.forget = db.prepare(`DELETE FROM containers WHERE state <> 'open' AND closed_at < ?`);
  }

  /** Writes each change over the row of its container (same name, station and opening time). */
  write(changes: readonly ContainerRow[]): void {
    for (const c of changes)
      this.upsert.run(
        c.container,
        c.per,
        c.station,
        c.parent,
        c.openedAt,
        c.lastReadAt,
        c.members,
        c.expected ?? null,
        c.state,
        c.closedAt ?? null,
        c.why ?? null,
        c.by ?? null,
        c.state === 'open' && c.memberRefs ? JSON.stringify(c.memberRefs) : null,
      );
  }

  /** Writes changes in a transaction of their own (a supervisor's close). */
  writeNow(changes: readonly ContainerRow[]): void {
    this.db.transaction(() => this.write(changes)).immediate();
  }

  /** The containers open when the buffer was last written, oldest first. */
  open(): ContainerRow[] {
    return (this.openRows.all() as Stored[]).map(toRow);
  }

  /** The containers whose parent reference is `parent` (at most 50), oldest first. */
  ofReference(parent: string): ContainerRow[] {
    return (this.ofParent.all(parent) as Stored[]).map(toRow);
  }

  /** Containers that ended in `state` since `sinceIso`, newest first, at most `limit`. */
  endedSince(state: ContainerRow['state'], sinceIso: string, limit: number): ContainerRow[] {
    return (this.closedSince.all(state, sinceIso, limit) as Stored[]).map(toRow);
  }

  /** Containers kept, by container name and state (the metric). */
  countsByState(): { container: string; state: string; n: number }[] {
    return this.byState.all() as { container: string; state: string; n: number }[];
  }

  /** Forgets closed containers that closed before `beforeIso` (past the audit period). */
  forgetClosed(beforeIso: string): number {
    return this.forget.run(beforeIso).changes;
  }
}
