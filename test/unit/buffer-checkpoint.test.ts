import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import {
  CHECKPOINT_BEYOND_END_BYTES,
  SMALL_COMMIT_BYTES,
  SMALL_COMMIT_RECORDS,
} from '../../src/buffer/intake-writes.js';
import { sqlOf } from '../helpers/buffer-sql.js';

// The bound on the write-ahead log, loose enough not to checkpoint at every commit: the log holds at most
// one big commit's new pages beyond the end of the database file, or 256 KiB and one small commit.
// SQLite's automatic checkpoint is off in these tests: on a full disk it fails without a word, and
// the bound must hold on the explicit checkpoints alone.

let store: BufferStore | undefined;
afterEach(() => store?.close());

function open(): BufferStore {
  store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-ckpt-')), 'buffer.db'));
  sqlOf(store).pragma('wal_autocheckpoint = 0');
  return store;
}

const MIB = 1024 * 1024;

function record(reference: string, pad: number, at: number): IntakeRecord {
  const body = JSON.stringify({
    reference,
    dcpKey: 'GI-01',
    timeStamp: new Date(at).toISOString(),
    pad: 'x'.repeat(pad),
  });
  return {
    inputId: 'in',
    receivedAt: new Date(at),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: {
      reference,
      dcpKey: 'GI-01',
      instant: new Date(at),
      body,
      bytes: Buffer.byteLength(body),
    },
  };
}

/** Small commits of one shape, each followed by the after-commit checkpoint as intake runs it. */
function smallCommits(
  s: BufferStore,
  commits: number,
  perCommit: number,
  make: (i: number) => IntakeRecord,
): { maxBeyond: number; fileGrowths: number } {
  let maxBeyond = 0;
  let fileGrowths = 0;
  let size = statSync(s.path).size;
  let i = 0;
  for (let c = 0; c < commits; c++) {
    s.intake.commitIntake(
      Array.from({ length: perCommit }, () => make(i++)),
      c,
    );
    maxBeyond = Math.max(maxBeyond, s.intake.bytesBeyondEnd());
    s.intake.checkpointAfterCommit();
    const now = statSync(s.path).size;
    if (now !== size) fileGrowths++;
    size = now;
  }
  return { maxBeyond, fileGrowths };
}

describe('write-ahead log checkpoints of intake commits', () => {
  it('leaves a small commit in the log: no checkpoint, so no fsync of the database file, until 256 KiB are beyond its end', () => {
    const s = open();
    s.intake.commitIntake([record('FIRST', 100, 0)], 0);
    s.intake.checkpointAfterCommit();
    expect(s.intake.bytesBeyondEnd()).toBeGreaterThan(0);
    expect(s.intake.bytesBeyondEnd()).toBeLessThanOrEqual(CHECKPOINT_BEYOND_END_BYTES);
  });

  it.each([
    ['one tiny read per commit (the 500 reads/s soak)', 1, (i: number) => record(`R${i}`, 0, i)],
    [
      `${SMALL_COMMIT_RECORDS} tiny reads per commit`,
      SMALL_COMMIT_RECORDS,
      (i: number) => record(`T${i}`, 0, i),
    ],
    [
      `${SMALL_COMMIT_RECORDS} reads of long references per commit`,
      SMALL_COMMIT_RECORDS,
      (i: number) => record(`${i}-`.padEnd(150, 'L'), 0, i),
    ],
    [
      'one read of nearly the whole small-commit size per commit',
      1,
      (i: number) => record(`B${i}`, SMALL_COMMIT_BYTES - 400, i),
    ],
  ])(
    'keeps the log within 1 MiB beyond the database file and checkpoints rarely: %s',
    (_name, perCommit, make) => {
      const s = open();
      const commits = 1500;
      const { maxBeyond, fileGrowths } = smallCommits(s, commits, perCommit, make);
      expect(maxBeyond).toBeGreaterThan(0);
      expect(maxBeyond).toBeLessThanOrEqual(MIB);
      // With a checkpoint at every commit, the database file would grow at nearly every commit.
      expect(fileGrowths).toBeGreaterThan(0);
      expect(fileGrowths).toBeLessThan(commits / 4);
    },
  );

  it('checkpoints before a big commit, so the log holds that commit alone beyond the database file', () => {
    const s = open();
    smallCommits(s, 3, 1, (i) => record(`S${i}`, 100, i));
    const beyondBefore = s.intake.bytesBeyondEnd();
    expect(beyondBefore).toBeGreaterThan(0);
    const fileBefore = statSync(s.path).size;
    const big = Array.from({ length: SMALL_COMMIT_RECORDS + 1 }, (_, i) => record(`BIG${i}`, 0, i));
    s.intake.commitIntake(big, 10);
    // The checkpoint before the commit copied the small commits' pages into the file.
    expect(statSync(s.path).size).toBeGreaterThanOrEqual(fileBefore + beyondBefore);
  });

  it('checkpoints before a commit whose bytes are too many for a small one, however few its records', () => {
    const s = open();
    smallCommits(s, 3, 1, (i) => record(`S${i}`, 100, i));
    const beyondBefore = s.intake.bytesBeyondEnd();
    const fileBefore = statSync(s.path).size;
    s.intake.commitIntake([record('HUGE', SMALL_COMMIT_BYTES + 1, 10)], 10);
    expect(statSync(s.path).size).toBeGreaterThanOrEqual(fileBefore + beyondBefore);
  });

  it('checkpoints before a small commit once more than 256 KiB are beyond the database file (the after-commit checkpoint did not run)', () => {
    const s = open();
    let i = 0;
    while (s.intake.bytesBeyondEnd() <= CHECKPOINT_BEYOND_END_BYTES)
      s.intake.commitIntake([record(`U${i++}`, 2000, i)], i);
    const beyondBefore = s.intake.bytesBeyondEnd();
    const fileBefore = statSync(s.path).size;
    s.intake.commitIntake([record('NEXT', 10, i)], i);
    expect(statSync(s.path).size).toBeGreaterThanOrEqual(fileBefore + beyondBefore);
    expect(s.intake.bytesBeyondEnd()).toBeLessThan(CHECKPOINT_BEYOND_END_BYTES);
  });
});
