import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BackPressure } from '../../src/buffer/back-pressure.js';
import { bufferFileBytes } from '../../src/buffer/disk-usage.js';
import {
  DERIVED_QUOTA_MAX_BYTES,
  DERIVED_QUOTA_RECHECK_MS,
  DERIVED_QUOTA_MIN_BYTES,
  DISK_BYTES_PER_QUOTA_BYTE,
  DiskGuard,
  derivedQuota,
  derivedQuotaForPath,
  quotaTooLargeForDisk,
} from '../../src/buffer/disk-guard.js';
import { Retention } from '../../src/buffer/retention.js';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { Intake } from '../../src/intake/intake.js';
import { configSchema } from '../../src/config/schema.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { ErrorCodes, isDiskFull } from '../../src/errors.js';
import { formBatch } from '../../src/delivery/batcher.js';
import { silentLogger } from '../../src/log.js';
import { sqlOf } from '../helpers/buffer-sql.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { queriesOf } from '../helpers/queries.js';

const MIB = 1024 * 1024;
const NOW = Date.parse('2026-12-31T12:00:00Z');
let store: BufferStore | undefined;
afterEach(() => store?.close());

const open = () =>
  (store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-diskguard-')), 'buffer.db')));

function scan(reference: string, at: number, pad = 1500): IntakeRecord {
  const body = JSON.stringify({ reference, pad: 'x'.repeat(pad) });
  return {
    inputId: 'in',
    receivedAt: new Date(at),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(at), body },
  };
}

/** Commits `n` scans, batches and finishes them (delivered, within the audit period). */
function deliveredBatch(s: BufferStore, prefix: string, n: number): number {
  s.intake.commitIntake(
    Array.from({ length: n }, (_, i) => scan(`${prefix}-${i}`, NOW)),
    NOW,
  );
  const b = formBatch(s, {
    maxScans: 10_000,
    maxBytes: 1e9,
    mode: 'direct',
    nowIso: new Date(NOW).toISOString(),
  })!;
  s.batches.updateBatch(b.id, { state: 'uploaded', requestId: String(b.id) });
  s.batches.finishBatch(b.id, { state: 'Success', failures: [] }, new Date(NOW).toISOString());
  return b.id;
}

/** Commits pending scans in groups until SQLite reports the (page-limited) database full. */
function fillWithPending(s: BufferStore, prefix: string): number {
  let n = 0;
  for (;;) {
    try {
      s.intake.commitIntake(
        Array.from({ length: 20 }, (_, i) => scan(`${prefix}-${n + i}`, NOW)),
        NOW,
      );
      n += 20;
    } catch (err) {
      expect(isDiskFull(err)).toBe(true);
      return n;
    }
  }
}

const roomy = () => ({ free: 10_000 * MIB, size: 20_000 * MIB });

describe('disk guard: the audit yields to undelivered data', () => {
  it('examines the disk and writes its reserve in start(), not when built', () => {
    const s = open();
    let statfsCalls = 0;
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger: silentLogger(),
      reserveBytes: MIB,
      statfs: () => (statfsCalls++, roomy()),
    });
    expect(statfsCalls).toBe(0);
    expect(existsSync(`${s.path}.reserve`)).toBe(false);
    guard.start();
    void guard.stop();
    expect(statfsCalls).toBeGreaterThan(0);
    expect(statSync(`${s.path}.reserve`).size).toBe(MIB);
  });

  it('new buffers use incremental auto-vacuum; an old one is switched by one VACUUM at start', () => {
    const s = open();
    expect(sqlOf(s).pragma('auto_vacuum', { simple: true })).toBe(2);
    deliveredBatch(s, 'OLD', 50);
    sqlOf(s).pragma('auto_vacuum = NONE');
    sqlOf(s).exec('VACUUM');
    expect(sqlOf(s).pragma('auto_vacuum', { simple: true })).toBe(0);
    const { logger, parsed } = memoryLogger('info');
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger }),
      logger,
      reserveBytes: 0,
      statfs: roomy,
    });
    guard.start();
    void guard.stop();
    expect(sqlOf(s).pragma('auto_vacuum', { simple: true })).toBe(2);
    expect(parsed().map((l) => l.msg)).toContain('buffer switched to incremental auto-vacuum');
    expect(sqlOf(s).pragma('integrity_check', { simple: true })).toBe('ok');
    expect(s.reports.totals().undeliveredScans).toBe(0);
    expect(sqlOf(s).prepare('SELECT count(*) FROM scans').pluck().get()).toBe(50);
  });

  it('says the free space from its start, before its first check (a buffer can reach its quota sooner)', async () => {
    const s = open();
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger: silentLogger(),
      reserveBytes: 0,
      statfs: () => ({ free: 123 * MIB, size: 200 * MIB }),
      intervalMs: 60_000,
    });
    guard.start();
    try {
      expect(guard.snapshot().freeBytes).toBe(123 * MIB);
    } finally {
      await guard.stop();
    }
  });

  it("estimates how long the free space lasts at the last day's rate of scans", async () => {
    const s = open();
    let now = NOW;
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger: silentLogger(),
      reserveBytes: 0,
      lowFreeBytes: 100 * MIB,
      statfs: () => ({ free: 1100 * MIB, size: 2000 * MIB }),
      intervalMs: 60_000,
      now: () => now,
    });
    guard.start();
    try {
      expect(guard.snapshot().runway).toBeUndefined();
      // 12,000 scans over an hour: 288,000 a day, each taking what the buffer's pages say.
      for (let h = 1; h <= 6; h++) {
        s.intake.commitIntake(
          Array.from({ length: 2000 }, (_, i) => scan(`R-${h}-${i}`, now, 200)),
          now,
        );
        now += 10 * 60_000;
        await guard.check();
      }
      const r = guard.snapshot().runway!;
      expect(r.scansPerDay).toBeCloseTo(288_000, 0);
      const used =
        (sqlOf(s).pragma('page_count', { simple: true }) as number) *
        (sqlOf(s).pragma('page_size', { simple: true }) as number);
      expect(r.bytesPerScan).toBeGreaterThan(200);
      expect(r.bytesPerScan).toBeLessThanOrEqual(used / 12_000);
      expect(r.days).toBeCloseTo((1000 * MIB) / (288_000 * r.bytesPerScan), 6);
    } finally {
      await guard.stop();
    }
  });

  it('skips the switch (and says so) when the disk has no room for the VACUUM', () => {
    const s = open();
    sqlOf(s).pragma('auto_vacuum = NONE');
    sqlOf(s).exec('VACUUM');
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger: silentLogger(),
      reserveBytes: 0,
      statfs: () => ({ free: 1024, size: 20 * MIB }),
    });
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
    const guard = new DiskGuard({
      store: s,
      retention,
      logger,
      reserveBytes: 0,
      statfs: roomy,
      step: 300,
      // A day and an hour on: the batches left the protected window (earlyPruneKeepHours 24).
      now: () => NOW + 25 * 3600_000,
    });
    guard.reportFull();
    await guard.check();

    // The oldest batch went first; the newest delivered one is still there (pressure was gone).
    const batches = sqlOf(s)
      .prepare(`SELECT id FROM batches ORDER BY id`)
      .pluck()
      .all() as number[];
    expect(batches).not.toContain(first);
    expect(batches).toContain(third);
    expect(batches.includes(second) ? 1 : 0).toBeLessThanOrEqual(1);
    expect(s.reports.totals().pendingScans).toBe(pending);
    const snap = guard.snapshot();
    expect(snap.prunedEarlyScans).toBeGreaterThanOrEqual(300);
    expect(snap.lastEarlyPrune?.scans).toBe(snap.prunedEarlyScans);
    expect(
      parsed().some((l) =>
        /pruned the oldest delivered scans before their audit period ended/.test(l.msg),
      ),
    ).toBe(true);
    // The pages went back to the file (incremental vacuum), not just to the free list.
    expect(sqlOf(s).pragma('page_count', { simple: true }) as number).toBeLessThan(pages + 100);
    // Intake commits again.
    s.intake.commitIntake(
      Array.from({ length: 20 }, (_, i) => scan(`AFTER-${i}`, NOW)),
      NOW,
    );
    expect(s.reports.totals().pendingScans).toBe(pending + 20);
    expect(sqlOf(s).pragma('integrity_check', { simple: true })).toBe('ok');
    expect(sqlOf(s).pragma('foreign_key_check')).toEqual([]);
  });

  it('never prunes undelivered scans: with only those left it prunes nothing and says so', async () => {
    const s = open();
    const pages = sqlOf(s).pragma('page_count', { simple: true }) as number;
    sqlOf(s).pragma(`max_page_count = ${pages + 200}`);
    const pending = fillWithPending(s, 'P');
    const { logger, parsed } = memoryLogger('info');
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger }),
      logger,
      reserveBytes: 0,
      statfs: roomy,
    });
    guard.reportFull();
    await guard.check();
    guard.reportFull();
    await guard.check();
    expect(s.reports.totals().pendingScans).toBe(pending);
    expect(guard.snapshot().prunedEarlyScans).toBe(0);
    // Said once per episode, not at every check.
    expect(parsed().filter((l) => /no delivered scans are left to prune/.test(l.msg))).toHaveLength(
      1,
    );
  });

  it('prunes early when free space is below the mark: oldest first, only the shortfall, remembered for trace', async () => {
    const s = open();
    const first = deliveredBatch(s, 'D1', 50);
    const second = deliveredBatch(s, 'D2', 50);
    const lowFree = 8 * MIB;
    // A shortfall of a few scans' worth: far less than the first batch.
    let free = lowFree - 10_000;
    const { logger, parsed } = memoryLogger('info');
    const retention = new Retention({ store: s, retentionDays: 30, logger, now: () => NOW });
    const guard = new DiskGuard({
      store: s,
      retention,
      logger,
      reserveBytes: 0,
      lowFreeBytes: lowFree,
      now: () => NOW + 25 * 3600_000,
      statfs: () => ({ free, size: 100 * MIB }),
    });
    const prune = retention.pruneOldestDelivered.bind(retention);
    retention.pruneOldestDelivered = async (...args) => {
      const r = await prune(...args);
      // What the file system would see once the pages go back.
      free += 8 * MIB;
      return r;
    };
    guard.start();
    await guard.stop();
    await guard.check();
    const left = (batchId: number) =>
      sqlOf(s).prepare(`SELECT count(*) FROM scan_rows WHERE batch_id = ?`).pluck().get(batchId);
    const pruned = guard.snapshot().prunedEarlyScans;
    expect(pruned).toBeGreaterThan(0);
    expect(pruned).toBeLessThan(50);
    expect(left(first)).toBe(50 - pruned);
    expect(left(second)).toBe(50);
    const lost = guard.snapshot().auditLost;
    expect(lost?.scans).toBe(pruned);
    expect(lost?.firstReadAt).toBe(new Date(NOW).toISOString());
    expect(lost?.reason).toMatch(/bytes free, below the mark of 8388608/);
    expect(parsed().some((l) => /only what frees the shortfall/.test(l.msg))).toBe(true);
    // trace names the prune for a pruned item, not for a kept one.
    const kept = new Set(
      sqlOf(s).prepare(`SELECT reference FROM scan_rows`).pluck().all() as string[],
    );
    const gone = Array.from({ length: 50 }, (_, i) => `D1-${i}`).filter((r) => !kept.has(r));
    expect(gone).toHaveLength(pruned);
    expect(
      sqlOf(s).prepare(`SELECT count(*) FROM early_pruned_refs`).pluck().get(),
      'one compact row per pruned reference',
    ).toBe(pruned);
    expect(queriesOf(s).trace(gone[0]!).prunedEarly?.[0]?.scans).toBe(pruned);
    expect(queriesOf(s).trace('D2-0').prunedEarly).toBeUndefined();
    // No pressure: nothing more goes.
    await guard.check();
    expect(guard.snapshot().prunedEarlyScans).toBe(pruned);
  });

  it('prunes nothing when even every eligible scan cannot free the shortfall, and says so', async () => {
    const s = open();
    deliveredBatch(s, 'D1', 50);
    const { logger, parsed } = memoryLogger('info');
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger, now: () => NOW }),
      logger,
      reserveBytes: 0,
      lowFreeBytes: 12 * MIB,
      now: () => NOW + 25 * 3600_000,
      // 2 MiB short: 50 scans of 1.5 KB cannot give that back.
      statfs: () => ({ free: 10 * MIB, size: 100 * MIB }),
    });
    await guard.check();
    await guard.check();
    expect(sqlOf(s).prepare(`SELECT count(*) FROM scan_rows`).pluck().get()).toBe(50);
    const snap = guard.snapshot();
    expect(snap.prunedEarlyScans).toBe(0);
    expect(snap.pruneCannotHelp).toMatch(
      /^pruning cannot help: \d+ bytes needed, at most \d+ recoverable/,
    );
    expect(parsed().filter((l) => /pruning cannot help/.test(l.msg))).toHaveLength(1);
  });

  it('on SQLITE_FULL prunes one small step even when the mark is out of reach, then nothing again', async () => {
    const s = open();
    deliveredBatch(s, 'D1', 600);
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger: silentLogger(),
      reserveBytes: 0,
      lowFreeBytes: 64 * MIB,
      now: () => NOW + 25 * 3600_000,
      statfs: () => ({ free: 0, size: 100 * MIB }),
    });
    guard.reportFull();
    await guard.check();
    // The step on a full disk is 500 scans: delivery gets room, the rest of the audit stays.
    expect(guard.snapshot().prunedEarlyScans).toBe(500);
    await guard.check();
    expect(guard.snapshot().prunedEarlyScans).toBe(500);
    expect(guard.snapshot().pruneCannotHelp).toMatch(/^pruning cannot help/);
  });

  it('never prunes early the delivered scans of the protected window (earlyPruneKeepHours)', async () => {
    const s = open();
    deliveredBatch(s, 'D1', 50);
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger: silentLogger(),
      reserveBytes: 0,
      lowFreeBytes: 8 * MIB,
      keepRecentHours: 24,
      // 23 hours after the batch finished: still inside the window.
      now: () => NOW + 23 * 3600_000,
      statfs: () => ({ free: 8 * MIB - 10_000, size: 100 * MIB }),
    });
    await guard.check();
    expect(sqlOf(s).prepare(`SELECT count(*) FROM scan_rows`).pluck().get()).toBe(50);
    expect(guard.snapshot().prunedEarlyScans).toBe(0);
    expect(guard.snapshot().pruneCannotHelp).toMatch(/older than 24 h/);
  });
});

describe('disk guard: a quota that fits the disk', () => {
  it('says when buffer.maxBytes is larger than the disk can hold, and not when it fits', () => {
    const s = open();
    const retention = new Retention({ store: s, retentionDays: 30, logger: silentLogger() });
    const statfs = () => ({ free: 100 * MIB, size: 200 * MIB });
    const { logger, parsed } = memoryLogger('warn');
    const big = new DiskGuard({
      store: s,
      retention,
      logger,
      reserveBytes: 0,
      lowFreeBytes: 8 * MIB,
      statfs,
      quotaBytes: 2 * 1024 * MIB,
    });
    big.start();
    void big.stop();
    expect(big.snapshot().quotaTooLarge).toMatch(
      /buffer.maxBytes \(2147483648 bytes of scans\) is larger than the disk can hold/,
    );
    expect(parsed().some((l) => /larger than the disk can hold/.test(l.msg))).toBe(true);
    const fits = new DiskGuard({
      store: s,
      retention,
      logger: silentLogger(),
      reserveBytes: 0,
      lowFreeBytes: 8 * MIB,
      statfs,
      quotaBytes: 10 * MIB,
    });
    fits.start();
    void fits.stop();
    expect(fits.snapshot().quotaTooLarge).toBeUndefined();
  });
});

describe('disk guard: the default byte quota derives from the disk (buffer.maxBytes not set)', () => {
  it('is what the disk holds (free and own bytes, less the reserve and the mark, 3.5 bytes on disk per byte), within 1 MiB..16 GiB', () => {
    // 100 MiB free, 20 MiB of buffer, the reserve written, the mark 12 MiB, 4 MiB for the write-ahead log.
    const d = derivedQuota(
      { free: 100 * MIB, size: 200 * MIB },
      20 * MIB,
      4 * MIB,
      4 * MIB,
      12 * MIB,
    );
    expect(d.holdsBytes).toBe(Math.floor((104 * MIB) / DISK_BYTES_PER_QUOTA_BYTE));
    expect(d.bytes).toBe(d.holdsBytes);
    // The ceiling is what the whole file system would hold: only that makes a submit "never".
    expect(d.ceilingBytes).toBe(Math.floor((180 * MIB) / DISK_BYTES_PER_QUOTA_BYTE));
    // The reserve released (not on disk): it will be written again, so it still counts against the room.
    expect(
      derivedQuota({ free: 100 * MIB, size: 200 * MIB }, 20 * MIB, 0, 4 * MIB, 12 * MIB).holdsBytes,
    ).toBe(Math.floor((100 * MIB) / DISK_BYTES_PER_QUOTA_BYTE));
    // A disk full of other programs' files: the smallest quota, never zero.
    expect(derivedQuota({ free: 0, size: 200 * MIB }, 0, 0, 4 * MIB, 12 * MIB)).toMatchObject({
      bytes: DERIVED_QUOTA_MIN_BYTES,
      holdsBytes: 0,
    });
    // A big disk: no more than the former fixed default.
    expect(
      derivedQuota({ free: 900 * 1024 * MIB, size: 1000 * 1024 * MIB }, 0, 0, 4 * MIB, 256 * MIB),
    ).toMatchObject({ bytes: DERIVED_QUOTA_MAX_BYTES, ceilingBytes: DERIVED_QUOTA_MAX_BYTES });
  });

  it('is derived at start and again every second as another program takes room, and logged when it moves', async () => {
    const s = open();
    let t = NOW;
    let free = 100 * MIB;
    const seen: { bytes: number; ceiling: number }[] = [];
    const { logger, parsed } = memoryLogger('info');
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger,
      reserveBytes: 0,
      lowFreeBytes: 8 * MIB,
      statfs: () => ({ free, size: 200 * MIB }),
      now: () => t,
      onDerivedQuota: (bytes, ceiling) => seen.push({ bytes, ceiling }),
    });
    guard.start();
    try {
      // The buffer's own files as disk-usage.ts measures them for everyone (database, log, its -shm index).
      const own = bufferFileBytes(s.path);
      const first = Math.floor((100 * MIB + own - 8 * MIB - 4 * MIB) / DISK_BYTES_PER_QUOTA_BYTE);
      expect(seen).toEqual([
        { bytes: first, ceiling: Math.floor((188 * MIB) / DISK_BYTES_PER_QUOTA_BYTE) },
      ]);
      expect(guard.snapshot()).toMatchObject({ derivedQuotaBytes: first });
      expect(guard.snapshot().quotaTooLarge).toBeUndefined();
      expect(parsed().filter((l) => /quota is derived from the disk/.test(l.msg))).toHaveLength(1);

      // Another program takes 60 MiB: not looked at again within the second...
      free = 40 * MIB;
      t += DERIVED_QUOTA_RECHECK_MS / 2;
      await guard.check();
      expect(seen).toHaveLength(1);
      // ...but after it: the quota shrinks, so it is still reached before the disk is.
      t += DERIVED_QUOTA_RECHECK_MS / 2;
      await guard.check();
      expect(seen).toHaveLength(2);
      expect(seen[1]!.bytes).toBeLessThan(first);
      expect(seen[1]!.bytes * DISK_BYTES_PER_QUOTA_BYTE).toBeLessThanOrEqual(
        40 * MIB + own - 8 * MIB - 4 * MIB,
      );
      expect(
        parsed().filter((l) => /quota derived from the disk changed/.test(l.msg)),
      ).toHaveLength(1);
      // The same again a second later: reported, not logged again.
      t += DERIVED_QUOTA_RECHECK_MS;
      await guard.check();
      expect(seen).toHaveLength(3);
      expect(
        parsed().filter((l) => /quota derived from the disk changed/.test(l.msg)),
      ).toHaveLength(1);
    } finally {
      await guard.stop();
    }
  });

  it("a configured quota is not replaced; a derived one is examined for the buffer's own folder", () => {
    const s = open();
    const seen: number[] = [];
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger: silentLogger(),
      reserveBytes: 0,
      statfs: roomy,
      quotaBytes: 10 * MIB,
      onDerivedQuota: (b) => seen.push(b),
    });
    guard.start();
    void guard.stop();
    expect(seen).toEqual([]);
    expect(guard.snapshot().derivedQuotaBytes).toBeUndefined();
    const d = derivedQuotaForPath(
      join(mkdtempSync(join(tmpdir(), 'sg-derive-')), 'not-yet', 'buffer.db'),
    );
    expect(d.bytes).toBeGreaterThanOrEqual(DERIVED_QUOTA_MIN_BYTES);
    expect(d.bytes).toBeLessThanOrEqual(DERIVED_QUOTA_MAX_BYTES);
    expect(d.ceilingBytes).toBeGreaterThanOrEqual(d.bytes);
    expect(derivedQuotaForPath(':memory:').bytes).toBe(DERIVED_QUOTA_MAX_BYTES);
  });

  it('back-pressure follows it: a smaller quota pauses intake, and one submit is given up on only above the ceiling', () => {
    const s = open();
    s.intake.commitIntake(
      Array.from({ length: 10 }, (_, i) => scan(`Q-${i}`, NOW, 1000)),
      NOW,
    );
    const bytes = s.reports.totals().undeliveredBytes;
    const paused: boolean[] = [];
    const gate = new BackPressure({
      store: s,
      limits: {
        maxPendingScans: 1000,
        maxBytes: 100 * bytes,
        pauseAtRatio: 0.9,
        resumeAtRatio: 0.8,
      },
      logger: silentLogger(),
      freeBytes: () => 1e12,
      onPausedChange: (p) => paused.push(p),
    });
    gate.start();
    try {
      expect(gate.snapshot()).toMatchObject({
        level: 'ok',
        intakePaused: false,
        maxBytes: 100 * bytes,
      });
      // The disk got fuller: the derived quota drops below what is buffered.
      gate.setByteQuota(bytes, 100 * bytes);
      expect(gate.snapshot()).toMatchObject({ level: 'full', intakePaused: true, maxBytes: bytes });
      expect(paused).toEqual([true]);
      // A submit over today's quota waits (refused, its source keeps it); only one over the
      // ceiling (the whole disk) is never taken.
      expect(gate.admit(1, 1000)).toMatch(/quota is reached/);
      expect(gate.tooLarge(1, 50 * bytes)).toBeUndefined();
      expect(gate.tooLarge(1, 101 * bytes)).toMatch(
        /the most the disk can hold; buffer.maxBytes is not set/,
      );
      // Room again: intake resumes by itself.
      gate.setByteQuota(100 * bytes, 100 * bytes);
      expect(gate.snapshot()).toMatchObject({ level: 'ok', intakePaused: false });
      expect(paused).toEqual([true, false]);
    } finally {
      gate.stop();
    }
  });
});

describe('quotaTooLargeForDisk (config check)', () => {
  it('says so for a quota beyond any disk, not for a small one, and examines the nearest existing folder', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sg-quota-disk-'));
    expect(quotaTooLargeForDisk(join(dir, 'not', 'yet', 'buffer.db'), 1e18)).toMatch(
      /larger than the disk can hold/,
    );
    expect(quotaTooLargeForDisk(join(dir, 'buffer.db'), 1024)).toBeUndefined();
    expect(quotaTooLargeForDisk(':memory:', 1e18)).toBeUndefined();
  });
});

describe('disk guard: the reserve', () => {
  it('writes real bytes beside the buffer, releases them on SQLITE_FULL, and writes them again when there is room', async () => {
    const s = open();
    let free = 500 * MIB;
    const guard = new DiskGuard({
      store: s,
      retention: new Retention({ store: s, retentionDays: 30, logger: silentLogger() }),
      logger: silentLogger(),
      reserveBytes: 2 * MIB,
      lowFreeBytes: 8 * MIB,
      statfs: () => ({ free, size: 1000 * MIB }),
    });
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
    // Released but its last sixteenth (at most 256 KiB), kept for the write-ahead log's checkpoint.
    expect(statSync(reserve).size).toBe(MIB / 8);
    expect(guard.snapshot()).toMatchObject({ reserveBytes: MIB / 8, reserveReleased: true });

    free = 500 * MIB;
    await guard.check();
    expect(statSync(reserve).size).toBe(2 * MIB);
    expect(guard.snapshot()).toMatchObject({ reserveBytes: 2 * MIB, reserveReleased: false });
    await guard.stop();
  });
});

describe("back-pressure after SQLITE_FULL: the reserve is delivery's", () => {
  it('stores nothing while the disk is full (also with room in between), and resumes only once the reserve is written again', async () => {
    const s = open();
    const config = configSchema.parse({
      site: { id: 'full', timezone: 'Europe/Berlin' },
      upstream: {
        baseUrl: 'http://127.0.0.1:1',
        authUrl: 'http://127.0.0.1:1',
        clientId: 'demo-client',
      },
      dcps: [
        {
          key: 'GI-01',
          kind: 'goodsIn',
          productModelKey: 'PACK-A',
          supplierKey: 'SUP-0042',
          duplicateWindowMs: 0,
        },
      ],
      inputs: [{ id: 'in', type: 'files', dir: join(tmpdir(), 'unused'), dcp: 'GI-01' }],
    });
    let reserveReady = true;
    const paused: boolean[] = [];
    const gate = new BackPressure({
      store: s,
      limits: { ...config.buffer, maxBytes: 1e9 },
      logger: silentLogger(),
      // The file system has room; SQLite's page limit is the full disk.
      freeBytes: () => 1e12,
      reserveReady: () => reserveReady,
      onPausedChange: (p) => paused.push(p),
    });
    const intake = new Intake({
      store: s,
      mapping: mappingContext(config),
      logger: silentLogger(),
      gate,
    });
    intake.open();
    const reads = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => ({
        kind: 'read' as const,
        read: {
          inputId: 'in',
          raw: Buffer.from(`R-${from + i}-${'x'.repeat(500)}`),
          receivedAt: new Date(),
        },
      }));
    const stored = () => sqlOf(s).prepare('SELECT count(*) FROM reads').pluck().get() as number;
    try {
      await intake.submit(reads(0, 10));
      sqlOf(s).pragma(
        `max_page_count = ${(sqlOf(s).pragma('page_count', { simple: true }) as number) + 2}`,
      );
      const full = await intake.submit(reads(10, 200)).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(isDiskFull(full)).toBe(true);
      expect(gate.snapshot().diskFull).toBeDefined();
      expect(paused).toEqual([true]);

      // Room again inside SQLite, but the disk guard has not written its reserve back yet (it was
      // released for delivery): a retry of a read in flight is refused, nothing is written.
      sqlOf(s).pragma('max_page_count = 1000000');
      reserveReady = false;
      const refused = await intake.submit(reads(300, 1)).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toMatchObject({ code: ErrorCodes.BUFFER_DISK_FULL, retryable: true });
      expect(stored()).toBe(10);
      gate.check();
      expect(gate.snapshot().diskFull).toBeDefined();
      expect(gate.writesRefused()).toMatch(/disk is full/);

      // The reserve is back: intake resumes by itself and stores again.
      reserveReady = true;
      gate.check();
      expect(gate.snapshot().diskFull).toBeUndefined();
      expect(gate.writesRefused()).toBeUndefined();
      expect(paused).toEqual([true, false]);
      await intake.submit(reads(400, 5));
      expect(stored()).toBe(15);
    } finally {
      intake.close();
      gate.stop();
    }
  });
});
