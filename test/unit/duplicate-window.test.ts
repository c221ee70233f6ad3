import { describe, expect, it } from 'vitest';
import { DuplicateWindow } from '../../src/mapping/duplicate-window.js';

describe('duplicate reads', () => {
  it('counts the same reference at the same DCP within the window as a duplicate', () => {
    const w = new DuplicateWindow();
    expect(w.check('GI-01', 'A', 1000, 2000)).toBe(false);
    expect(w.check('GI-01', 'A', 2500, 2000)).toBe(true);
    expect(w.check('GI-01', 'A', 3001, 2000)).toBe(false);
  });

  it('keeps DCPs apart and turns off at 0', () => {
    const w = new DuplicateWindow();
    expect(w.check('GI-01', 'A', 1000, 2000)).toBe(false);
    expect(w.check('EOL-3', 'A', 1000, 2000)).toBe(false);
    expect(w.check('EOL-3', 'B', 1000, 0)).toBe(false);
    expect(w.check('EOL-3', 'B', 1001, 0)).toBe(false);
  });

  it('forgets a reference whose commit failed', () => {
    const w = new DuplicateWindow();
    expect(w.check('GI-01', 'A', 1000, 2000)).toBe(false);
    w.forget('GI-01', 'A', 1000);
    expect(w.check('GI-01', 'A', 1001, 2000)).toBe(false);
  });

  it('keeps entries of a long window when a short window sweeps', () => {
    const w = new DuplicateWindow();
    expect(w.check('LONG', 'A', 0, 300_000)).toBe(false);
    expect(w.check('SHORT', 'B', 200_000, 1000)).toBe(false);
    expect(w.check('LONG', 'A', 250_000, 300_000)).toBe(true);
  });
});

describe('duplicate window bound and rebuild', () => {
  it('drops the reference taken longest ago at its bound, and counts it', () => {
    const w = new DuplicateWindow(3);
    for (const ref of ['A', 'B', 'C']) expect(w.check('GI-01', ref, 1000, 60_000)).toBe(false);
    expect(w.check('GI-01', 'A', 1001, 60_000)).toBe(true);
    expect(w.check('GI-01', 'D', 1002, 60_000)).toBe(false); // the fourth: A, the oldest taken, goes
    expect(w.size).toBe(3);
    expect(w.evicted).toBe(1);
    // A repeat of the dropped reference within its window is taken again: sent twice, never lost.
    expect(w.check('GI-01', 'A', 1003, 60_000)).toBe(false);
    expect(w.check('GI-01', 'C', 1004, 60_000)).toBe(true);
  });

  it('restores references taken before, keeping the later instant', () => {
    const w = new DuplicateWindow();
    w.restore('GI-01', 'A', 5000, 2000);
    w.restore('GI-01', 'A', 1000, 2000);
    w.restore('GI-01', 'B', 1000, 0); // window off: nothing kept
    expect(w.size).toBe(1);
    expect(w.check('GI-01', 'A', 6500, 2000)).toBe(true);
    expect(w.check('GI-01', 'B', 1001, 2000)).toBe(false);
  });
});
