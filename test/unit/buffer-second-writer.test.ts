import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore } from '../../src/buffer/store.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { scanAt } from '../helpers/records.js';

// `scan-gateway replay` writes the buffer while the daemon runs (docs/delivery.md, "Concurrent
// access"). A daemon transaction that reads and then writes must not fail because the other
// writer committed in between: the store begins its write transactions IMMEDIATE.

const NOW = Date.parse('2026-11-25T08:00:00Z');
const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

function buffer(): { daemon: BufferStore; path: string } {
  const path = join(mkdtempSync(join(tmpdir(), 'sg-second-writer-')), 'buffer.db');
  const daemon = BufferStore.openAt(path);
  open.push(daemon);
  daemon.intake.commitIntake(
    ['A', 'B', 'C'].map((r) => scanAt(r, 'GI-01', NOW)),
    NOW,
  );
  return { daemon, path };
}

describe('a second writer on the buffer (replay beside the daemon)', () => {
  it('a deferred transaction of the daemon would fail when the other commits between its read and its write', () => {
    // What the store avoids, shown with bare connections: SQLITE_BUSY_SNAPSHOT, no busy handler.
    const { path } = buffer();
    const daemon = new Database(path);
    const other = new Database(path);
    open.push(daemon, other);
    daemon.pragma('busy_timeout = 5000');
    let err: unknown;
    try {
      daemon.transaction(() => {
        daemon.prepare(`SELECT count(*) FROM scan_rows WHERE state = 'pending'`).get();
        other.prepare(`INSERT INTO counters (name, value) VALUES ('x', 1)`).run();
        daemon.prepare(`UPDATE buffer_totals SET pending_scans = pending_scans WHERE id = 1`).run();
      })();
    } catch (e) {
      err = e;
    }
    expect((err as { code?: string }).code).toBe('SQLITE_BUSY_SNAPSHOT');
  });

  it("the store's transaction holds the write lock from its first read: the other writer waits, the daemon's write goes through", () => {
    const { daemon, path } = buffer();
    const other = new Database(path);
    open.push(other);
    // The other process would wait up to 5 s and then commit; in one thread it can only give up.
    other.pragma('busy_timeout = 50');
    let otherErr: unknown;
    const batch = daemon.atomically(() => {
      const pending = [...daemon.batches.pendingScans()];
      try {
        other.prepare(`INSERT INTO counters (name, value) VALUES ('x', 1)`).run();
      } catch (e) {
        otherErr = e;
      }
      return daemon.batches.writeBatch({
        mode: 'direct',
        scanIds: pending.map((p) => p.id),
        bytes: 100,
        nowIso: new Date(NOW).toISOString(),
      });
    });
    expect((otherErr as { code?: string }).code).toBe('SQLITE_BUSY');
    expect(batch?.scanCount).toBe(3);
    // Once the daemon's transaction is over, the other writer commits.
    other.prepare(`INSERT INTO counters (name, value) VALUES ('x', 1)`).run();
    expect(sqlOf(daemon).prepare(`SELECT value FROM counters WHERE name = 'x'`).pluck().get()).toBe(
      1,
    );
  });

  it('forming and finishing a batch on the daemon go through while another process holds a read transaction open', () => {
    const { daemon, path } = buffer();
    const reader = new Database(path, { readonly: true });
    open.push(reader);
    const snapshot = reader.transaction(() => {
      const before = reader
        .prepare(`SELECT count(*) FROM scans WHERE state = 'pending'`)
        .pluck()
        .get();
      const batch = formBatch(daemon, {
        maxScans: 10,
        maxBytes: 1e6,
        mode: 'direct',
        nowIso: new Date(NOW).toISOString(),
      })!;
      daemon.batches.finishBatch(batch.id, { state: 'Success' }, new Date(NOW).toISOString());
      // The reader still sees its snapshot: WAL readers are not blocked, and do not block.
      return {
        before,
        during: reader.prepare(`SELECT count(*) FROM scans WHERE state = 'pending'`).pluck().get(),
      };
    })();
    expect(snapshot).toEqual({ before: 3, during: 3 });
    expect(daemon.reports.scanCounts()).toEqual({ delivered: 3 });
  });
});
