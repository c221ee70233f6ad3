/**
 * Time stamps on the wire (contract §2.5) are `yyyy-MM-ddTHH:mm:ss` with no zone: the gateway writes
 * them in the site's IANA time zone and keeps the UTC instant beside them. Intl does the zone
 * arithmetic (it carries the tz database), so daylight-saving changes are handled by the platform.
 */

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

export interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function wallClock(instantMs: number, timeZone: string): WallClock {
  const parts: Record<string, number> = {};
  for (const p of formatter(timeZone).formatToParts(new Date(instantMs))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  return {
    year: parts.year!,
    month: parts.month!,
    day: parts.day!,
    hour: parts.hour!,
    minute: parts.minute!,
    second: parts.second!,
  };
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** Formats an instant as `yyyy-MM-ddTHH:mm:ss` in `timeZone` (contract §2.5 wire format). */
export function formatWireTime(instant: Date, timeZone: string): string {
  const ms = instant.getTime();
  const offset = cachedOffset(ms, timeZone);
  if (offset === undefined) {
    const w = wallClock(ms, timeZone);
    return `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}`;
  }
  const d = new Date(Math.floor(ms / 1000) * 1000 + offset);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/** Offsets are looked up per 15-minute span: Intl's formatToParts was half the cost of mapping a read. */
const SPAN_MS = 15 * 60_000;
const offsetSpans = new Map<string, Map<number, number | null>>();

/**
 * The zone's offset throughout the 15-minute span holding `ms`, or undefined when the offset
 * changes inside that span (then the caller asks Intl for this instant itself).
 */
function cachedOffset(ms: number, timeZone: string): number | undefined {
  const span = Math.floor(ms / SPAN_MS);
  let spans = offsetSpans.get(timeZone);
  if (!spans) {
    spans = new Map();
    offsetSpans.set(timeZone, spans);
  }
  let offset = spans.get(span);
  if (offset === undefined) {
    const first = offsetAt(span * SPAN_MS, timeZone);
    const last = offsetAt(span * SPAN_MS + SPAN_MS - 1000, timeZone);
    offset = first === last ? first : null;
    if (spans.size >= 256) spans.clear();
    spans.set(span, offset);
  }
  return offset ?? undefined;
}

/** Offset of `timeZone` from UTC at `instantMs`, in ms (east positive). */
function offsetAt(instantMs: number, timeZone: string): number {
  const w = wallClock(instantMs, timeZone);
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  return asUtc - Math.floor(instantMs / 1000) * 1000;
}

/**
 * The instant at which the wall clock in `timeZone` shows the given local time. In the hour that
 * the autumn change repeats, the earlier (summer time) instant is taken; a time inside the spring
 * gap does not exist and is moved forward by the gap, as most libraries do.
 */
export function zonedWallTimeToInstant(w: WallClock & { ms?: number }, timeZone: string): Date {
  const naive = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second, w.ms ?? 0);
  const offsetBefore = offsetAt(naive - 24 * 3600_000, timeZone);
  const offsetAfter = offsetAt(naive + 24 * 3600_000, timeZone);
  // Try the larger (earlier instant) offset first so an ambiguous time resolves to its first occurrence.
  for (const offset of [Math.max(offsetBefore, offsetAfter), Math.min(offsetBefore, offsetAfter)]) {
    const candidate = naive - offset;
    if (offsetAt(candidate, timeZone) === offset) return new Date(candidate);
  }
  return new Date(naive - Math.min(offsetBefore, offsetAfter));
}

const ISO_LOCAL =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?$/;

/**
 * Parses an ISO 8601 time stamp as sources write it: with a zone (`Z`, `+01:00`, `+0100`) it is an
 * instant; without one it is a wall time in the site's time zone. Answers undefined for anything
 * else, including impossible dates such as 30 February.
 */
export function parseSourceTime(text: string, siteTimeZone: string): Date | undefined {
  const m = ISO_LOCAL.exec(text.trim());
  if (!m) return undefined;
  const [, year, month, day, hour, minute, second, fraction, zone] = m;
  return timePartsToInstant(
    {
      year: Number(year),
      month: Number(month),
      day: Number(day),
      hour: Number(hour),
      minute: Number(minute),
      second: Number(second ?? 0),
      fraction,
      zone,
    },
    siteTimeZone,
  );
}

/** The parts of a written time stamp, as numbers; `fraction` holds the digits after the point. */
export interface TimeParts extends WallClock {
  fraction?: string | undefined;
  /** `Z`, `+01:00`, `+0100`, `-05`; absent for a wall time at the site. */
  zone?: string | undefined;
}

/**
 * The instant a written time stamp names: with a zone, that offset; without, the site's wall time
 * (see {@link zonedWallTimeToInstant}). Undefined for a date or time that does not exist (30
 * February, 25:00), so a wrong time is refused rather than rolled over.
 */
export function timePartsToInstant(p: TimeParts, siteTimeZone: string): Date | undefined {
  const ms = p.fraction ? Math.floor(Number(`0.${p.fraction}`) * 1000) : 0;
  const check = new Date(Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second));
  if (
    p.month < 1 ||
    check.getUTCFullYear() !== p.year ||
    check.getUTCMonth() !== p.month - 1 ||
    check.getUTCDate() !== p.day ||
    check.getUTCHours() !== p.hour ||
    check.getUTCMinutes() !== p.minute ||
    p.second > 59
  ) {
    return undefined;
  }
  if (!p.zone) return zonedWallTimeToInstant({ ...p, ms }, siteTimeZone);
  const base = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second, ms);
  if (p.zone === 'Z') return new Date(base);
  const sign = p.zone.startsWith('-') ? -1 : 1;
  const digits = p.zone.slice(1).replace(':', '');
  const offsetMin = Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || 0);
  return new Date(base - sign * offsetMin * 60_000);
}
