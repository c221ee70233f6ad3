/**
 * GS1 check digits and check character pairs.
 *
 * Source: GS1 General Specifications section 7.9.1 (standard check digit calculation for GS1 data
 * structures, weights 3 and 1 from the right) and 7.9.5 (check character pair for alphanumeric
 * keys, used by the GMN, AI 8013).
 */

/**
 * The GS1 mod-10 check digit for a string of digits *without* its check digit: the digits are
 * weighted 3, 1, 3, … starting from the rightmost, and the check digit brings the sum to a multiple
 * of ten. Works for every length GS1 uses (GTIN-8/12/13/14, GLN, SSCC, GSIN, GSRN…).
 *
 * @returns 0–9, or -1 when `digits` is empty or holds anything other than ASCII digits.
 */
export function gs1CheckDigit(digits: string): number {
  if (!/^\d+$/.test(digits)) return -1;
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    const digit = digits.charCodeAt(digits.length - 1 - i) - 48;
    sum += i % 2 === 0 ? digit * 3 : digit;
  }
  return (10 - (sum % 10)) % 10;
}

/**
 * Whether the last digit of `digits` is the GS1 mod-10 check digit of the digits before it.
 * False for fewer than two characters or anything that is not all ASCII digits.
 */
export function hasValidCheckDigit(digits: string): boolean {
  if (digits.length < 2 || !/^\d+$/.test(digits)) return false;
  return gs1CheckDigit(digits.slice(0, -1)) === digits.charCodeAt(digits.length - 1) - 48;
}

/** CSET 82 in the order that gives each character its value for the check character pair. */
const CSET82_ORDERED =
  '!"%&\'()*+,-./0123456789:;<=>?ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
/** The 32 characters a check character can be (no 0, 1, I, O). */
const CSET32 = '23456789ABCDEFGHJKLMNPQRSTUVWXYZ';

function primes(count: number): number[] {
  const out: number[] = [];
  for (let n = 2; out.length < count; n++) {
    if (out.every((p) => n % p !== 0)) out.push(n);
  }
  return out;
}

/** Enough prime weights for the longest AI value (90 characters). */
const PRIME_WEIGHTS = primes(97);

/**
 * The two check characters of a GS1 alphanumeric key (GMN) for `data` without them: the values of
 * the characters (their position in CSET 82) weighted by primes increasing from the right, modulo
 * 1021, split into two 5-bit halves that index CSET 32.
 *
 * @returns the pair, or `undefined` when `data` holds a character outside CSET 82 or is longer
 *   than 97 characters.
 */
export function gs1CheckCharacterPair(data: string): string | undefined {
  if (data.length > PRIME_WEIGHTS.length) return undefined;
  let sum = 0;
  for (let i = 0; i < data.length; i++) {
    const value = CSET82_ORDERED.indexOf(data.charAt(i));
    if (value < 0) return undefined;
    sum += value * (PRIME_WEIGHTS[data.length - 1 - i] ?? 0);
  }
  sum %= 1021;
  return `${CSET32.charAt(sum >> 5)}${CSET32.charAt(sum & 31)}`;
}
