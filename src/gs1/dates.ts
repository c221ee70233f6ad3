/**
 * Dates and times inside GS1 element strings.
 *
 * Source: GS1 General Specifications section 7.12 (determining the century of a YY year) and the
 * AI definitions of section 3.4 (YYMMDD; "if only year and month are available, DD must be filled
 * with two zeroes", which the Syntax Dictionary calls `yymmd0`).
 */

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
] as const;

/**
 * The full year of a two-digit GS1 year, by the sliding window of General Specifications 7.12:
 * with `d = yy - (referenceYear mod 100)`, a `d` of 51…99 means the previous century, −99…−50 the
 * next century, anything else the reference year's century. The window is therefore 49 years back
 * and 50 years ahead of the reference year.
 *
 * @param yy 0–99.
 * @param referenceYear the full year the data is read in (normally the current year).
 */
export function resolveCentury(yy: number, referenceYear: number): number {
  const century = Math.floor(referenceYear / 100) * 100;
  const difference = yy - (referenceYear % 100);
  if (difference >= 51) return century - 100 + yy;
  if (difference <= -50) return century + 100 + yy;
  return century + yy;
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

/** Days in `month` (1–12) of `year`. */
export function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** A checked calendar date, or the reason it is not one. */
export type DateCheck = { ok: true; iso: string } | { ok: false; problem: string };

function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0');
}

/**
 * Checks a calendar date and formats it as ISO 8601 (`2028-12-31`).
 *
 * @param dayZeroAllowed when true, day `00` stands for the last day of the month (`yymmd0`).
 */
export function checkDate(
  year: number,
  month: number,
  day: number,
  dayZeroAllowed: boolean,
): DateCheck {
  if (month < 1 || month > 12) return { ok: false, problem: `month ${pad(month)} does not exist` };
  const monthName = MONTHS[month - 1] ?? '';
  const last = daysInMonth(year, month);
  if (day === 0) {
    if (!dayZeroAllowed) return { ok: false, problem: 'day 00 is not allowed in this date' };
    return { ok: true, iso: `${pad(year, 4)}-${pad(month)}-${pad(last)}` };
  }
  if (day > last) return { ok: false, problem: `${day} ${monthName} ${year} does not exist` };
  return { ok: true, iso: `${pad(year, 4)}-${pad(month)}-${pad(day)}` };
}

/**
 * Checks a six-digit GS1 date `YYMMDD` and resolves its century.
 *
 * @param digits exactly six ASCII digits (the caller has checked the character set).
 */
export function checkYymmdd(
  digits: string,
  referenceYear: number,
  dayZeroAllowed: boolean,
): DateCheck {
  const yy = Number(digits.slice(0, 2));
  const year = resolveCentury(yy, referenceYear);
  return checkDate(year, Number(digits.slice(2, 4)), Number(digits.slice(4, 6)), dayZeroAllowed);
}

/** Checks an eight-digit date `YYYYMMDD` (AIs 7250, 7251). */
export function checkYyyymmdd(digits: string): DateCheck {
  return checkDate(
    Number(digits.slice(0, 4)),
    Number(digits.slice(4, 6)),
    Number(digits.slice(6, 8)),
    false,
  );
}
