import { describe, expect, it } from 'vitest';
import { formatWireTime, parseSourceTime } from '../../src/format/time.js';

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
    expect(parseSourceTime('2026-11-18T06:58:12+01:00', BERLIN)?.toISOString()).toBe(
      '2026-11-18T05:58:12.000Z',
    );
    expect(parseSourceTime('2026-11-18T07:01:02.123Z', BERLIN)?.toISOString()).toBe(
      '2026-11-18T07:01:02.123Z',
    );
    expect(parseSourceTime('2026-11-18T06:58:12+0100', BERLIN)?.toISOString()).toBe(
      '2026-11-18T05:58:12.000Z',
    );
  });

  it('reads a zone-less time as wall time at the site', () => {
    expect(parseSourceTime('2026-11-18T06:58:12', BERLIN)?.toISOString()).toBe(
      '2026-11-18T05:58:12.000Z',
    );
    expect(parseSourceTime('2026-07-01 12:00:00', BERLIN)?.toISOString()).toBe(
      '2026-07-01T10:00:00.000Z',
    );
  });

  it('takes the first of the repeated autumn hour and moves a spring-gap time forward', () => {
    expect(parseSourceTime('2026-10-25T02:30:00', BERLIN)?.toISOString()).toBe(
      '2026-10-25T00:30:00.000Z',
    );
    expect(parseSourceTime('2026-03-29T02:30:00', BERLIN)?.toISOString()).toBe(
      '2026-03-29T01:30:00.000Z',
    );
  });

  it('refuses what is not a real time', () => {
    expect(parseSourceTime('2026-02-30T10:00:00', BERLIN)).toBeUndefined();
    expect(parseSourceTime('18.11.2026 06:58', BERLIN)).toBeUndefined();
    expect(parseSourceTime('2026-11-18T25:00:00', BERLIN)).toBeUndefined();
    expect(parseSourceTime('', BERLIN)).toBeUndefined();
  });
});

describe('wire time agrees with Intl at every instant', () => {
  it('matches a direct Intl formatting across both 2026 changes and random instants', () => {
    const viaIntl = (ms: number, zone: string) =>
      new Intl.DateTimeFormat('sv-SE', { timeZone: zone, dateStyle: 'short', timeStyle: 'medium' })
        .format(ms)
        .replace(' ', 'T');
    const zones = [
      'Europe/Berlin',
      'America/New_York',
      'Asia/Kolkata',
      'Australia/Lord_Howe',
      'UTC',
    ];
    const instants: number[] = [];
    for (const around of [
      '2026-03-29T01:00:00Z',
      '2026-10-25T01:00:00Z',
      '2026-03-08T07:00:00Z',
      '2026-11-01T06:00:00Z',
      '2026-04-05T15:00:00Z',
    ]) {
      const t = Date.parse(around);
      for (let d = -3_600_000; d <= 3_600_000; d += 59_000) instants.push(t + d);
    }
    let seed = 42;
    for (let i = 0; i < 2000; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      instants.push(Date.UTC(2000, 0, 1) + (seed / 2 ** 31) * 40 * 365 * 86_400_000);
    }
    for (const zone of zones)
      for (const ms of instants) expect(formatWireTime(new Date(ms), zone)).toBe(viaIntl(ms, zone));
  });
});
