import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DiskGuard, quotaTooLargeForDisk } from '../../src/buffer/disk-guard.js';
import { Retention } from '../../src/buffer/retention.js';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { isDiskFull } from '../../src/errors.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { silentLogger } from '../../src/log.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { memoryLogger } from '../helpers/log-lines.js';

const MIB = 1024 * 1024;
const NOW = Date.parse('2026-12-31T12:00:00Z');
let store: BufferStore | undefined;
afterEach(() => store?.close());

const open = () => (store = new BufferStore(join(mkdtempSync(join(tmpdir(), 'sg-diskguard-')), 'buffer.db')));

function scan(reference: string, at: number, pad = 1500): IntakeRecord {
  const body = JSON.stringify({ reference, pad: 'x'.repeat(pad) });
  return { inputId: 'in', receivedAt: new Date(at), raw: Buffer.from(reference), outcome: 'scan', scan: { reference, dcpKey: 'GI-01', instant: new Date(at), body } };
}

/** Commits `n` scans, batches and finishes them (delivered, within the audit period). */
function deliveredBatch(s: BufferStore, prefix: string, n: number): number {
  s.commitIntake(Array.from({ length: n }, (_, i) => scan(`${prefix}-${i}`, NOW)), NOW);
  const b = formBatch(s, { maxScans: 10_000, maxBytes: 1e9, mode: 'direct', nowIso: new Date(NOW).toISOString() })!;
  s.updateBatch(b.id, { state: 'uploaded', requestId: String(b.id) });
  s.finishBatch(b.id, { state: 'Success', failures: [] }, new Date(NOW).toISOString());
  return b.id;
}

/** Commits pending scans in groups until SQLite reports the (page-limited) database full. */
function fillWithPending(s: BufferStore, prefix: string): number {
  let n = 0;
  for (;;) {
    try {
      s.commitIntake(Array.from({ length: 20 }, (_, i) => scan(`${prefix}-${n + i}`, NOW)), NOW);
      n += 20;
    } catch (err) {
      expect(isDiskFull(err)).toBe(true);
      return n;
    }
  }
}

const roomy = () => ({ free: 10_000 * MIB, size: 20_000 * MIB });

describe('disk guard: the audit yields to undelivered data', () => {
  it('new buffers use incremental auto-vacuum; an old one is switched by one VACUUM at start', () => {
    const s = open();
    expect(sqlOf(s).pragma('auto_vacuum', { simple: true })).toBe(2);
    deliveredBatch(s, 'OLD', 50);
    sqlOf(s).pragma('auto_vacuum = NONE');
    sqlOf(s).exec('VACUUM');
    expect(sqlOf(s).pragma('auto_vacuum', { simple: true })).toBe(0);
    const { logger, parsed } = memoryLogger('info');
    const guard = new DiskGuard({ store: s, retention: new Retention({ store: s, retentionDays: 30, logger }), logger, reserveBytes: 0, statfs: roomy });
    guard.start();
    void guard.stop();
    expect(sqlOf(s).pragma('auto_vacuum', { simple: true })).toBe(2);
    expect(parsed().map((l) => l.msg)).toContain('buffer switched to incremental auto-vacuum');
    expect(sqlOf(s).pragma('integrity_check', { simple: true })).toBe('ok');
    expect(s.totals().undeliveredScans).toBe(0);
    expect(sqlOf(s).prepare('SELECT count(*) FROM scans').pluck().get()).toBe(50);
  });

  it('skips the switch (and says so) when the disk has no room for the VACUUM', () => {
    const s = open();
    sqlOf(s).pragma('auto_vacuum = NONE');
    sqlOf(s).exec('VACUUM');
    const guard = new DiskGuard({ store: s, retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }), logger: silentLogger(), reserveBytes: 0, statfs: () => ({ free: 1024, size: 20 * MIB }) });
    guard.start();
    void guard.stop();
    expect(sqlOf(s).pragma('auto_vacuum', { simple: true })).toBe(0);
    expect(guard.snapshot().vacuumPending).toMatch(/not switched/);
  });

  it('on SQLITE_FULL prunes the oldest delivered scans first, keeps every undelivered one, and intake commits again', async () => {
    const s = open();
    const first = deliveredBatch(s, 'D1', 300);
    const second = deliveredBatch(s, 'D2', 300);
    const third = deliveredBatch(s, 'D3', 300);
    const pages = sqlOf(s).pragma('page_count', { simple: true }) as number;
    sqlOf(s).pragma(`max_page_count = ${pages + 100}`);
    const pending = fillWithPending(s, 'P');
    expect(pending).toBeGreaterThan(0);

    const { logger, parsed } = memoryLogger('info');
    const retention = new Retention({ store: s, retentionDays: 30, logger, now: () => NOW });
    const guard = new DiskGuard({ store: s, retention, logger, reserveBytes: 0, statfs: roomy, step: 300, now: () => NOW });
    guard.reportFull();
    await guard.check();

    // The oldest batch went first; the newest delivered one is still there (pressure was gone).
    const batches = sqlOf(s).prepare(`SELECT id FROM batches ORDER BY id`).pluck().all() as number[];
    expect(batches).not.toContain(first);
    expect(batches).toContain(third);
    expect(batches.includes(second) ? 1 : 0).toBeLessThanOrEqual(1);
    expect(s.totals().pendingScans).toBe(pending);
    const snap = guard.snapshot();
    expect(snap.prunedEarlyScans).toBeGreaterThanOrEqual(300);
    expect(snap.lastEarlyPrune?.scans).toBe(snap.prunedEarlyScans);
    expect(parsed().some((l) => /pruned the oldest delivered scans before their audit period ended/.test(l.msg))).toBe(true);
    // The pages went back to the file (incremental vacuum), not just to the free list.
    expect(sqlOf(s).pragma('page_count', { simple: true }) as number).toBeLessThan(pages + 100);
    // Intake commits again.
    s.commitIntake(Array.from({ length: 20 }, (_, i) => scan(`AFTER-${i}`, NOW)), NOW);
    expect(s.totals().pendingScans).toBe(pending + 20);
    expect(sqlOf(s).pragma('integrity_check', { simple: true })).toBe('ok');
    expect(sqlOf(s).pragma('foreign_key_check')).toEqual([]);
  });

  it('never prunes undelivered scans: with only those left it prunes nothing and says so', async () => {
    const s = open();
    const pages = sqlOf(s).pragma('page_count', { simple: true }) as number;
    sqlOf(s).pragma(`max_page_count = ${pages + 200}`);
    const pending = fillWithPending(s, 'P');
    const { logger, parsed } = memoryLogger('info');
    const guard = new DiskGuard({ store: s, retention: new Retention({ store: s, retentionDays: 30, logger }), logger, reserveBytes: 0, statfs: roomy });
    guard.reportFull();
    await guard.check();
    guard.reportFull();
    await guard.check();
    expect(s.totals().pendingScans).toBe(pending);
    expect(guard.snapshot().prunedEarlyScans).toBe(0);
    // Said once per episode, not at every check.
    expect(parsed().filter((l) => /no delivered scans are left to prune/.test(l.msg))).toHaveLength(1);
  });

  it('prunes early when free space is below the mark, not only on SQLITE_FULL', async () => {
    const s = open();
    const first = deliveredBatch(s, 'D1', 50);
    deliveredBatch(s, 'D2', 50);
    let free = 1 * MIB;
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger: silentLogger(),
      reserveBytes: 0,
      lowFreeBytes: 8 * MIB,
      step: 50,
      // Each prune step "frees" 8 MiB: one batch is enough.
      statfs: () => ({ free, size: 100 * MIB }),
    });
    const retention = (guard as unknown as { options: { retention: Retention } }).options.retention;
    const prune = retention.pruneOldestDelivered.bind(retention);
    retention.pruneOldestDelivered = async (n) => {
      const r = await prune(n);
      free += 8 * MIB;
      return r;
    };
    await guard.check();
    const batches = sqlOf(s).prepare(`SELECT id FROM batches ORDER BY id`).pluck().all() as number[];
    expect(batches).not.toContain(first);
    expect(guard.snapshot().prunedEarlyScans).toBe(50);
    // No pressure: nothing more goes.
    await guard.check();
    expect(guard.snapshot().prunedEarlyScans).toBe(50);
  });
});

describe('disk guard: a quota that fits the disk', () => {
  it('says when buffer.maxBytes is larger than the disk can hold, and not when it fits', () => {
    const s = open();
    const retention = new Retention({ store: s, retentionDays: 30, logger: silentLogger() });
    const statfs = () => ({ free: 100 * MIB, size: 200 * MIB });
    const { logger, parsed } = memoryLogger('warn');
    const big = new DiskGuard({ store: s, retention, logger, reserveBytes: 0, lowFreeBytes: 8 * MIB, statfs, quotaBytes: 2 * 1024 * MIB });
    big.start();
    void big.stop();
    expect(big.snapshot().quotaTooLarge).toMatch(/buffer.maxBytes \(2147483648 bytes of scans\) is larger than the disk can hold/);
    expect(parsed().some((l) => /larger than the disk can hold/.test(l.msg))).toBe(true);
    const fits = new DiskGuard({ store: s, retention, logger: silentLogger(), reserveBytes: 0, lowFreeBytes: 8 * MIB, statfs, quotaBytes: 10 * MIB });
    fits.start();
    void fits.stop();
    expect(fits.snapshot().quotaTooLarge).toBeUndefined();
  });
});

describe('quotaTooLargeForDisk (config check)', () => {
  it('says so for a quota beyond any disk, not for a small one, and examines the nearest existing folder', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-quota-disk-'));
    expect(quotaTooLargeForDisk(join(dir, 'not', 'yet', 'buffer.db'), 1e18)).toMatch(/larger than the disk can hold/);
    expect(quotaTooLargeForDisk(join(dir, 'buffer.db'), 1024)).toBeUndefined();
    expect(quotaTooLargeForDisk(':memory:', 1e18)).toBeUndefined();
  });
});

describe('disk guard: the reserve', () => {
  it('writes real bytes beside the buffer, releases them on SQLITE_FULL, and writes them again when there is room', async () => {
    const s = open();
    let free = 500 * MIB;
    const guard = new DiskGuard({ store: s, retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }), logger: silentLogger(), reserveBytes: 2 * MIB, lowFreeBytes: 8 * MIB, statfs: () => ({ free, size: 1000 * MIB }) });
    guard.start();
    const reserve = `${s.path}.reserve`;
    const st = statSync(reserve);
    expect(st.size).toBe(2 * MIB);
    // Not sparse: the blocks are allocated.
    expect(st.blocks * 512).toBeGreaterThanOrEqual(2 * MIB);
    expect(guard.snapshot()).toMatchObject({ reserveBytes: 2 * MIB, reserveReleased: false });

    free = 0;
    guard.reportFull();
    await guard.check();
    expect(existsSync(reserve)).toBe(false);
    expect(guard.snapshot()).toMatchObject({ reserveBytes: 0, reserveReleased: true });

    free = 500 * MIB;
    await guard.check();
    expect(statSync(reserve).size).toBe(2 * MIB);
    expect(guard.snapshot()).toMatchObject({ reserveBytes: 2 * MIB, reserveReleased: false });
    await guard.stop();
  });
});
