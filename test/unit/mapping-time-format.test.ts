import { describe, expect, it } from 'vitest';
import { compileTimeFormat, type TimeFormat } from '../../src/format/time-format.js';

const BERLIN = 'Europe/Berlin';

function format(pattern: string): TimeFormat {
  const f = compileTimeFormat(pattern);
  if (typeof f === 'string') throw new Error(f);
  return f;
}

describe('configured time formats', () => {
  it.each([
    ['dd.MM.yyyy HH:mm:ss', '18.11.2026 06:58:12', '2026-11-18T05:58:12.000Z'],
    ['dd.MM.yyyy HH:mm:ss', ' 01.07.2026 12:00:00 ', '2026-07-01T10:00:00.000Z'],
    ['d.M.yy H:mm', '8.3.26 7:05', '2026-03-08T06:05:00.000Z'],
    ['yyyyMMddHHmmss', '20261118065812', '2026-11-18T05:58:12.000Z'],
    ["yyyy-MM-dd'T'HH:mm:ss.SSSXXX", '2026-11-18T06:58:12.250+01:00', '2026-11-18T05:58:12.250Z'],
    ["yyyy-MM-dd'T'HH:mm:ssXX", '2026-11-18T06:58:12-0130', '2026-11-18T08:28:12.000Z'],
    ["yyyy-MM-dd'T'HH:mm:ssX", '2026-11-18T06:58:12Z', '2026-11-18T06:58:12.000Z'],
    ["MM/dd/yyyy HH:mm 'h'", '11/18/2026 06:58 h', '2026-11-18T05:58:00.000Z'],
    ['dd.MM.yyyy HH:mm:ss.SSSSSS', '18.11.2026 06:58:12.123456', '2026-11-18T05:58:12.123Z'],
    // Daylight saving (Europe/Berlin): spring 2026-03-29 02:00 → 03:00, autumn 2026-10-25 03:00 → 02:00.
    ['dd.MM.yyyy HH:mm:ss', '29.03.2026 01:59:59', '2026-03-29T00:59:59.000Z'],
    ['dd.MM.yyyy HH:mm:ss', '29.03.2026 02:30:00', '2026-03-29T01:30:00.000Z'],
    ['dd.MM.yyyy HH:mm:ss', '29.03.2026 03:00:00', '2026-03-29T01:00:00.000Z'],
    ['dd.MM.yyyy HH:mm:ss', '25.10.2026 02:30:00', '2026-10-25T00:30:00.000Z'],
    ['dd.MM.yyyy HH:mm:ss', '25.10.2026 03:00:00', '2026-10-25T02:00:00.000Z'],
    ['epochSeconds', '1792891800', '2026-10-25T01:30:00.000Z'],
    ['epochSeconds', '1792891800.5', '2026-10-25T01:30:00.500Z'],
    ['epochMillis', '1792891800123', '2026-10-25T01:30:00.123Z'],
  ])('%s reads %j as %s', (pattern, text, iso) => {
    expect(format(pattern).parse(text, BERLIN)?.toISOString()).toBe(iso);
  });

  it.each([
    ['dd.MM.yyyy HH:mm:ss', '31.02.2026 06:00:00'],
    ['dd.MM.yyyy HH:mm:ss', '18.13.2026 06:00:00'],
    ['dd.MM.yyyy HH:mm:ss', '18.11.2026 24:00:00'],
    ['dd.MM.yyyy HH:mm:ss', '18.11.2026 06:60:00'],
    ['dd.MM.yyyy HH:mm:ss', '18.11.2026 06:58'],
    ['dd.MM.yyyy HH:mm:ss', '2026-11-18T06:58:12'],
    ['epochSeconds', '-5'],
    ['epochMillis', '12e5'],
  ])('%s refuses %j', (pattern, text) => {
    expect(format(pattern).parse(text, BERLIN)).toBeUndefined();
  });

  it.each([
    ['dd.MM.yyyy hh:mm', /"hh" at position 12 is not a pattern letter/],
    ['dd.MM.yyyy HH:mm:ss a', /"a" at position 21/],
    ["dd.MM.yyyy 'T HH:mm", /unclosed quote/],
    ['dd.MM HH:mm', /has no year/],
    ['MM.yyyy HH:mm', /has no day/],
    ['dd.MM.yyyy HH', /has no minute/],
    ['dd.MM.yyyy HH:mm dd', /holds the day twice/],
    ['dd.MM.yyyy HH:mm:ss.SSSSSSSSSS', /at most 9 fraction digits/],
  ])('refuses the pattern %j with a reason', (pattern, reason) => {
    const f = compileTimeFormat(pattern);
    expect(typeof f).toBe('string');
    expect(f).toMatch(reason);
  });
});
