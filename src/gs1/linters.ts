/**
 * Content checks of AI data components, named as in the GS1 Barcode Syntax Dictionary (the
 * `,name` suffixes of the specs in `ai-table.ts`). Each runs after the character set was checked.
 *
 * Source: GS1 General Specifications sections 3 (per AI), 7.9 (check digits), 7.12 (century).
 */

import type { LinterName } from './ai-table.js';
import { gs1CheckCharacterPair, gs1CheckDigit } from './check-digit.js';
import { checkYymmdd, checkYyyymmdd } from './dates.js';
import { ISO3166_ALPHA2, ISO3166_NUMERIC } from './iso-codes.js';

/** What a component check needs besides the data. */
export interface LintContext {
  /** The year two-digit years are resolved against (General Specifications 7.12). */
  referenceYear: number;
}

/**
 * The outcome of one check. `date` / `time` carry the ISO form of a date or time component;
 * `problem` is phrased to follow `AI 17 (USE BY OR EXPIRY): `, or, when `checkDigit` is set, to
 * follow `AI 01 (GTIN) ` directly (`check digit is 4, expected 3`).
 */
export type LintResult =
  { ok: true; date?: string; time?: string } | { ok: false; problem: string; checkDigit?: boolean };

/**
 * Checks whose reference lists or rules this module does not carry: data of these AIs is checked
 * for length and character set only (currency codes, IBANs, AIDC media types, package types,
 * importer indexes, coordinates, North American coupon codes).
 */
export const UNCHECKED_LINTERS: ReadonlySet<LinterName> = new Set<LinterName>([
  'iso4217',
  'iban',
  'mediatype',
  'packagetype',
  'importeridx',
  'latitude',
  'longitude',
  'couponcode',
  'couponposoffer',
]);

const OK: LintResult = { ok: true };
const GCP_MIN_LENGTH = 4;

function fail(problem: string): LintResult {
  return { ok: false, problem };
}

function twoDigitRange(value: string, max: number, what: string): LintResult {
  return Number(value) <= max ? { ok: true, time: value } : fail(`${what} ${value} does not exist`);
}

function gcpAt(value: string, offset: number): LintResult {
  const gcp = value.slice(offset, offset + GCP_MIN_LENGTH);
  return /^\d{4}$/.test(gcp)
    ? OK
    : fail('does not start with a GS1 Company Prefix (at least 4 digits)');
}

/** Runs one named check on one component's text. */
export function lint(name: LinterName, value: string, ctx: LintContext): LintResult {
  switch (name) {
    case 'csum': {
      const expected = gs1CheckDigit(value.slice(0, -1));
      const actual = value.slice(-1);
      return String(expected) === actual
        ? OK
        : {
            ok: false,
            problem: `check digit is ${actual}, expected ${expected}`,
            checkDigit: true,
          };
    }
    case 'csumalpha': {
      if (value.length < 2) return fail('is too short to hold its two check characters');
      const expected = gs1CheckCharacterPair(value.slice(0, -2));
      const actual = value.slice(-2);
      if (expected === actual) return OK;
      return {
        ok: false,
        problem: `check characters are ${actual}, expected ${expected ?? '(none: invalid data)'}`,
        checkDigit: true,
      };
    }
    case 'gcppos1':
      return gcpAt(value, 0);
    case 'gcppos2':
      return gcpAt(value, 1);
    case 'yymmd0':
    case 'yymmdd': {
      const check = checkYymmdd(value, ctx.referenceYear, name === 'yymmd0');
      return check.ok ? { ok: true, date: check.iso } : fail(`${check.problem} (${value})`);
    }
    case 'yyyymmdd': {
      const check = checkYyyymmdd(value);
      return check.ok ? { ok: true, date: check.iso } : fail(`${check.problem} (${value})`);
    }
    case 'hh':
      return twoDigitRange(value, 23, 'hour');
    case 'mi':
      return twoDigitRange(value, 59, 'minute');
    case 'ss':
      return twoDigitRange(value, 59, 'second');
    case 'hhmi': {
      const hh = value.slice(0, 2);
      const mi = value.slice(2, 4);
      if (Number(hh) > 23) return fail(`hour ${hh} does not exist`);
      if (Number(mi) > 59) return fail(`minute ${mi} does not exist`);
      return { ok: true, time: `${hh}:${mi}` };
    }
    case 'zero':
      return value === '0' ? OK : fail(`must begin with the digit 0, not ${value}`);
    case 'nonzero':
      return /^0+$/.test(value) ? fail(`${value} must not be zero`) : OK;
    case 'nozeroprefix':
      return value.startsWith('0') ? fail('must not begin with 0') : OK;
    case 'pieceoftotal': {
      const piece = Number(value.slice(0, value.length / 2));
      const total = Number(value.slice(value.length / 2));
      if (piece === 0 || total === 0) return fail(`piece ${piece} of ${total}: neither may be 0`);
      return piece <= total
        ? OK
        : fail(`piece ${piece} of ${total}: the piece number exceeds the total`);
    }
    case 'yesno':
      return value === '0' || value === '1' ? OK : fail(`${value} must be 0 (no) or 1 (yes)`);
    case 'winding':
      return ['0', '1', '9'].includes(value)
        ? OK
        : fail(`winding direction ${value} must be 0, 1 or 9`);
    case 'hyphen':
      return value === '-' ? OK : fail(`'${value}' must be '-' (a negative temperature)`);
    case 'hasnondigit':
      return /\D/.test(value)
        ? OK
        : fail('must contain at least one character that is not a digit');
    case 'iso3166':
      return ISO3166_NUMERIC.has(value) ? OK : fail(`${value} is not an ISO 3166 country code`);
    case 'iso3166999':
      return value === '999' || ISO3166_NUMERIC.has(value)
        ? OK
        : fail(`${value} is not an ISO 3166 country code or 999`);
    case 'iso3166alpha2':
      return ISO3166_ALPHA2.has(value)
        ? OK
        : fail(`${value} is not an ISO 3166 alpha-2 country code`);
    case 'iso5218':
      return ['0', '1', '2', '9'].includes(value)
        ? OK
        : fail(`${value} is not an ISO/IEC 5218 code (0, 1, 2 or 9)`);
    case 'pcenc': {
      const bad = /%(?![0-9A-Fa-f]{2})/.exec(value);
      return bad
        ? fail(`'%' at position ${bad.index + 1} does not start a percent-encoded character`)
        : OK;
    }
    case 'posinseqslash': {
      const match = /^([1-9]\d*)\/([1-9]\d*)$/.exec(value);
      if (!match) return fail(`'${value}' is not a position in a sequence such as 1/2`);
      return Number(match[1]) <= Number(match[2])
        ? OK
        : fail(`position ${value}: the position exceeds the end`);
    }
    case 'iso4217':
    case 'iban':
    case 'mediatype':
    case 'packagetype':
    case 'importeridx':
    case 'latitude':
    case 'longitude':
    case 'couponcode':
    case 'couponposoffer':
      // UNCHECKED_LINTERS: length and character set were checked by the caller.
      return OK;
  }
}
