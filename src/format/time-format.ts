import { timePartsToInstant } from './time.js';

/**
 * Configured time-stamp formats (`timeFormat` of a rule), for sources that do not write ISO 8601:
 * a MES export with `18.11.2026 06:58:12`, a PLC sending Unix time. Patterns use the letters of
 * Java's DateTimeFormatter / Unicode TR35, the ones plant IT already knows from Excel and MES tools.
 *
 * | letters | meaning |
 * |---|---|
 * | `yyyy` / `yy` | year; `yy` is 2000–2099 |
 * | `MM` / `M` | month, two digits / one or two |
 * | `dd` / `d` | day of month |
 * | `HH` / `H` | hour 0–23 |
 * | `mm`, `ss` | minute, second (two digits) |
 * | `S`…`SSSSSSSSS` | fraction of a second, that many digits |
 * | `XXX` / `XX` / `X` | zone offset `+01:00` / `+0100` / `+01`, or `Z` |
 * | `'text'` | literal text; `''` is one quote |
 *
 * Any other letter is refused (it would otherwise be taken as a literal and never match). Without a
 * zone letter the time is a wall time in the site's time zone, resolved like ISO times without zone
 * (see {@link zonedWallTimeToInstant}). The special formats `epochSeconds` and `epochMillis` read
 * Unix time (UTC, decimal).
 */
export interface TimeFormat {
  /** The pattern as configured. */
  readonly pattern: string;
  /** The instant the text denotes, or undefined when it does not fit the pattern or is no calendar date. */
  parse(text: string, siteTimeZone: string): Date | undefined;
}

type Field =
  'year' | 'year2' | 'month' | 'day' | 'hour' | 'minute' | 'second' | 'fraction' | 'zone';

const TOKENS: ReadonlyArray<{ letters: string; field: Field; regex: string }> = [
  { letters: 'yyyy', field: 'year', regex: '(\\d{4})' },
  { letters: 'yy', field: 'year2', regex: '(\\d{2})' },
  { letters: 'MM', field: 'month', regex: '(\\d{2})' },
  { letters: 'M', field: 'month', regex: '(\\d{1,2})' },
  { letters: 'dd', field: 'day', regex: '(\\d{2})' },
  { letters: 'd', field: 'day', regex: '(\\d{1,2})' },
  { letters: 'HH', field: 'hour', regex: '(\\d{2})' },
  { letters: 'H', field: 'hour', regex: '(\\d{1,2})' },
  { letters: 'mm', field: 'minute', regex: '(\\d{2})' },
  { letters: 'ss', field: 'second', regex: '(\\d{2})' },
  { letters: 'XXX', field: 'zone', regex: '(Z|[+-]\\d{2}:\\d{2})' },
  { letters: 'XX', field: 'zone', regex: '(Z|[+-]\\d{4})' },
  { letters: 'X', field: 'zone', regex: '(Z|[+-]\\d{2})' },
];

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Compiles a pattern. Answers a {@link TimeFormat}, or a sentence saying what is wrong with the
 * pattern (for the configuration check).
 */
export function compileTimeFormat(pattern: string): TimeFormat | string {
  if (pattern === 'epochSeconds' || pattern === 'epochMillis') return epochFormat(pattern);
  let regex = '^';
  const fields: Field[] = [];
  let i = 0;
  while (i < pattern.length) {
    const ch = pattern[i]!;
    if (ch === "'") {
      const end = pattern.indexOf("'", i + 1);
      if (end < 0) return `unclosed quote at position ${i + 1} of "${pattern}"`;
      regex += end === i + 1 ? "'" : escapeRegex(pattern.slice(i + 1, end));
      i = end + 1;
      continue;
    }
    if (/[A-Za-z]/.test(ch)) {
      let run = 1;
      while (pattern[i + run] === ch) run++;
      const letters = pattern.slice(i, i + run);
      if (ch === 'S') {
        if (run > 9) return `at most 9 fraction digits (S), got ${run}`;
        regex += `(\\d{${run}})`;
        fields.push('fraction');
      } else {
        const token = TOKENS.find((t) => t.letters === letters);
        if (!token) {
          return `"${letters}" at position ${i + 1} is not a pattern letter this gateway knows (yyyy, yy, MM, M, dd, d, HH, H, mm, ss, S…, XXX, XX, X); put literal text in single quotes, e.g. 'T'`;
        }
        regex += token.regex;
        fields.push(token.field);
      }
      i += run;
      continue;
    }
    regex += escapeRegex(ch);
    i++;
  }
  regex += '$';
  for (const needed of ['month', 'day', 'hour', 'minute'] as const) {
    if (!fields.includes(needed)) return `the pattern "${pattern}" has no ${needed}`;
  }
  if (!fields.includes('year') && !fields.includes('year2'))
    return `the pattern "${pattern}" has no year (yyyy or yy)`;
  const duplicate = fields.find((f, n) => fields.indexOf(f) !== n);
  if (duplicate) return `the pattern "${pattern}" holds the ${duplicate} twice`;
  const compiled = new RegExp(regex);
  return {
    pattern,
    parse(text, siteTimeZone) {
      const m = compiled.exec(text.trim());
      if (!m) return undefined;
      const v: Partial<Record<Field, string>> = {};
      fields.forEach((f, n) => (v[f] = m[n + 1]));
      return toInstant(v, siteTimeZone);
    },
  };
}

function toInstant(v: Partial<Record<Field, string>>, siteTimeZone: string): Date | undefined {
  return timePartsToInstant(
    {
      year: v.year !== undefined ? Number(v.year) : 2000 + Number(v.year2),
      month: Number(v.month),
      day: Number(v.day),
      hour: Number(v.hour),
      minute: Number(v.minute),
      second: Number(v.second ?? 0),
      fraction: v.fraction,
      zone: v.zone,
    },
    siteTimeZone,
  );
}

function epochFormat(pattern: 'epochSeconds' | 'epochMillis'): TimeFormat {
  const scale = pattern === 'epochSeconds' ? 1000 : 1;
  return {
    pattern,
    parse(text) {
      const t = text.trim();
      if (!/^\d{1,16}(\.\d+)?$/.test(t)) return undefined;
      const ms = Math.round(Number(t) * scale);
      const d = new Date(ms);
      return Number.isFinite(d.getTime()) ? d : undefined;
    },
  };
}
