import { describe, expect, it } from 'vitest';
import { planEarlyPrune } from '../../src/buffer/early-prune-plan.js';

const MIB = 1024 * 1024;
// A buffer of 10,000 scans in 20 MiB of pages: 2,097.152 bytes a scan.
const buffer = { usedBytes: 20 * MIB, scanRows: 10_000, freePageBytes: 0 };

describe('early pruning takes only the shortfall', () => {
  it('nothing when free space is at or above the mark', () => {
    expect(
      planEarlyPrune({ ...buffer, freeBytes: 8 * MIB, lowFreeBytes: 8 * MIB, eligibleScans: 9000 }),
    ).toEqual({ kind: 'none', shortfallBytes: 0 });
  });

  it('nothing when the free pages inside the file cover the shortfall (the vacuum returns them)', () => {
    expect(
      planEarlyPrune({
        ...buffer,
        freePageBytes: MIB,
        freeBytes: 8 * MIB - 4096,
        lowFreeBytes: 8 * MIB,
        eligibleScans: 9000,
      }).kind,
    ).toBe('none');
  });

  it('the fewest scans whose bytes cover the shortfall, rounded up', () => {
    // 1 MiB short at 2,097.152 bytes a scan: 500 scans exactly; one byte more needs 501.
    expect(
      planEarlyPrune({ ...buffer, freeBytes: 7 * MIB, lowFreeBytes: 8 * MIB, eligibleScans: 9000 }),
    ).toEqual({ kind: 'prune', scans: 500, shortfallBytes: MIB, bytesPerScan: 2097.152 });
    const plus = planEarlyPrune({
      ...buffer,
      freeBytes: 7 * MIB - 1,
      lowFreeBytes: 8 * MIB,
      eligibleScans: 9000,
    });
    expect(plus.kind === 'prune' && plus.scans).toBe(501);
    // A one-byte shortfall still takes one whole scan.
    const one = planEarlyPrune({
      ...buffer,
      freeBytes: 8 * MIB - 1,
      lowFreeBytes: 8 * MIB,
      eligibleScans: 9000,
    });
    expect(one.kind === 'prune' && one.scans).toBe(1);
  });

  it('nothing, and why, when every eligible scan cannot cover it (the on-call log: 2.3 MiB short, 0.5 MiB to take)', () => {
    // 456 scans of a 0.5 MiB buffer against 12 MiB − 10,301,440 bytes = 2,281,472 bytes short.
    expect(
      planEarlyPrune({
        usedBytes: 512 * 1024,
        scanRows: 456,
        freePageBytes: 0,
        freeBytes: 10_301_440,
        lowFreeBytes: 12_582_912,
        eligibleScans: 456,
      }),
    ).toEqual({ kind: 'cannotHelp', neededBytes: 2_281_472, recoverableBytes: 524_288 });
  });

  it('counts only the eligible scans (the protected window and undelivered ones are not recoverable)', () => {
    // 2,000 of 10,000 eligible: at most 4,194,304 bytes; 5 MiB short cannot be covered.
    const p = planEarlyPrune({
      ...buffer,
      freeBytes: 3 * MIB,
      lowFreeBytes: 8 * MIB,
      eligibleScans: 2000,
    });
    expect(p).toEqual({ kind: 'cannotHelp', neededBytes: 5 * MIB, recoverableBytes: 4_194_304 });
    // With none eligible, never a division into a prune.
    expect(
      planEarlyPrune({ ...buffer, freeBytes: 3 * MIB, lowFreeBytes: 8 * MIB, eligibleScans: 0 })
        .kind,
    ).toBe('cannotHelp');
    expect(
      planEarlyPrune({
        usedBytes: 0,
        scanRows: 0,
        freePageBytes: 0,
        freeBytes: 3 * MIB,
        lowFreeBytes: 8 * MIB,
        eligibleScans: 0,
      }).kind,
    ).toBe('cannotHelp');
  });
});
