import type Database from 'better-sqlite3';

/**
 * Where the reading of the status-event topic stands (contract §6, delivery/status-events.ts):
 * the next offset to read of each partition, stored in the transaction that applied the events
 * before it, so a restart goes on after the last applied event. Built by `BufferStore.open` on its
 * connection; its statements are prepared once, here.
 */
export class EventPositions {
  private readonly read: Database.Statement;
  private readonly save: Database.Statement;

  constructor(db: Database.Database) {
    this.read = db.prepare(
      `SELECT partition, next_offset AS next FROM status_event_positions WHERE topic = ?`,
    );
    this.save = db.prepare(
      `INSERT INTO status_event_positions (topic, partition, next_offset, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (topic, partition) DO UPDATE SET next_offset = excluded.next_offset, updated_at = excluded.updated_at`,
    );
  }

  /**
   * The next offset to read of each partition of `topic`, as stored by {@link saveEventPosition};
   * a partition never read is absent. Offsets are 64-bit (kept as decimal text).
   */
  eventPositions(topic: string): Map<number, bigint> {
    const rows = this.read.all(topic) as { partition: number; next: string }[];
    return new Map(rows.map((r) => [r.partition, BigInt(r.next)]));
  }

  /** Stores the next offset to read of one partition; called in the transaction that applied the events before it. */
  saveEventPosition(topic: string, partition: number, next: bigint, nowIso: string): void {
    this.save.run(topic, partition, next.toString(), nowIso);
  }
}
