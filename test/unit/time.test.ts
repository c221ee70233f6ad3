import { describe, expect, it } from 'vitest';
import { formatWireTime, parseSourceTime } from '../../src/mapping/time.js';

const BERLIN = 'Europe/Berlin';

describe('wire time in the site time zone', () => {
  it('formats winter and summer instants with their own offsets', () => {
    expect(formatWireTime(new Date('2026-11-18T05:58:12Z'), BERLIN)).toBe('2026-11-18T06:58:12');
    expect(formatWireTime(new Date('2026-07-01T10:00:00Z'), BERLIN)).toBe('2026-07-01T12:00:00');
  });

  it('writes midnight as 00, not 24', () => {
    expect(formatWireTime(new Date('2026-11-17T23:00:00Z'), BERLIN)).toBe('2026-11-18T00:00:00');
  });

  it('crosses the spring change (2026-03-29 02:00 → 03:00 in Berlin)', () => {
    expect(formatWireTime(new Date('2026-03-29T00:59:59Z'), BERLIN)).toBe('2026-03-29T01:59:59');
    expect(formatWireTime(new Date('2026-03-29T01:00:00Z'), BERLIN)).toBe('2026-03-29T03:00:00');
  });

  it('crosses the autumn change (2026-10-25 03:00 → 02:00 in Berlin): the hour repeats', () => {
    expect(formatWireTime(new Date('2026-10-25T00:30:00Z'), BERLIN)).toBe('2026-10-25T02:30:00');
    expect(formatWireTime(new Date('2026-10-25T01:30:00Z'), BERLIN)).toBe('2026-10-25T02:30:00');
  });
});

describe('source time stamps', () => {
  it('reads an offset as an instant', () => {
    expect(parseSourceTime('2026-11-18T06:58:12+01:00', BERLIN)?.toISOString()).toBe('2026-11-18T05:58:12.000Z');
    expect(parseSourceTime('2026-11-18T07:01:02.123Z', BERLIN)?.toISOString()).toBe('2026-11-18T07:01:02.123Z');
    expect(parseSourceTime('2026-11-18T06:58:12+0100', BERLIN)?.toISOString()).toBe('2026-11-18T05:58:12.000Z');
  });

  it('reads a zone-less time as wall time at the site', () => {
    expect(parseSourceTime('2026-11-18T06:58:12', BERLIN)?.toISOString()).toBe('2026-11-18T05:58:12.000Z');
    expect(parseSourceTime('2026-07-01 12:00:00', BERLIN)?.toISOString()).toBe('2026-07-01T10:00:00.000Z');
  });

  it('takes the first of the repeated autumn hour and moves a spring-gap time forward', () => {
    expect(parseSourceTime('2026-10-25T02:30:00', BERLIN)?.toISOString()).toBe('2026-10-25T00:30:00.000Z');
    expect(parseSourceTime('2026-03-29T02:30:00', BERLIN)?.toISOString()).toBe('2026-03-29T01:30:00.000Z');
  });

  it('refuses what is not a real time', () => {
    expect(parseSourceTime('2026-02-30T10:00:00', BERLIN)).toBeUndefined();
    expect(parseSourceTime('18.11.2026 06:58', BERLIN)).toBeUndefined();
    expect(parseSourceTime('2026-11-18T25:00:00', BERLIN)).toBeUndefined();
    expect(parseSourceTime('', BERLIN)).toBeUndefined();
  });
});
