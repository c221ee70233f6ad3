import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BYTES_PER_SCAN,
  RUNWAY_MIN_WINDOW_MS,
  estimateRunway,
  runwayText,
} from '../../src/buffer/runway.js';

const HOUR = 3600_000;
const GIB = 2 ** 30;

describe('how long the buffer disk lasts at the current rate', () => {
  it("divides the room above the mark by a day's scans times the bytes each takes", () => {
    // 3.5 M scans a day (a 40 GWh plant) at 750 bytes: 2.6 GB a day; 30 GiB above the mark.
    const r = estimateRunway({
      samples: [
        { at: 0, lastId: 1_000_000 },
        { at: 12 * HOUR, lastId: 2_750_000 },
      ],
      freeBytes: 31 * GIB,
      lowFreeBytes: GIB,
      usedBytes: 750 * 2_000_000,
      scansHeld: 2_000_000,
    })!;
    expect(r.scansPerDay).toBe(3_500_000);
    expect(r.bytesPerScan).toBe(750);
    expect(r.days).toBeCloseTo((30 * GIB) / (3_500_000 * 750), 6);
    expect(r.text).toBe("12 days of scans at today's rate");
  });

  it('takes the measured default per scan while the buffer holds too few scans to tell', () => {
    const r = estimateRunway({
      samples: [
        { at: 0, lastId: 0 },
        { at: HOUR, lastId: 100 },
      ],
      freeBytes: GIB,
      lowFreeBytes: 0,
      usedBytes: 4 * 2 ** 20,
      scansHeld: 100,
    })!;
    expect(r.bytesPerScan).toBe(DEFAULT_BYTES_PER_SCAN);
  });

  it('says nothing before the rate was watched for a while, nor when no scan was written', () => {
    const base = { freeBytes: GIB, lowFreeBytes: 0, usedBytes: 0, scansHeld: 0 };
    expect(estimateRunway({ ...base, samples: [] })).toBeUndefined();
    expect(
      estimateRunway({
        ...base,
        samples: [
          { at: 0, lastId: 0 },
          { at: RUNWAY_MIN_WINDOW_MS - 1, lastId: 5000 },
        ],
      }),
    ).toBeUndefined();
    expect(
      estimateRunway({
        ...base,
        samples: [
          { at: 0, lastId: 7 },
          { at: HOUR, lastId: 7 },
        ],
      }),
    ).toBeUndefined();
  });

  it('reads as hours, then minutes, as the room runs out; none left is no time', () => {
    const at = runwayText;
    expect(at(1.5)).toBe("36 hours of scans at today's rate");
    expect(at(1 / 24)).toBe("60 minutes of scans at today's rate");
    expect(at(0)).toBe("0 minutes of scans at today's rate");
  });
});
