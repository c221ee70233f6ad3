/**
 * The entry point of GS1 parsing: from the text of one read to GS1 elements, a reason why the GS1
 * data is not valid, or plain data. Pure and total: no I/O, never throws.
 *
 * Source: GS1 General Specifications 5.1.2 / figure 5.4.6-1 (symbology identifiers), 7.8 (element
 * strings), 4.14 (AI pairings), 7.9 (check digits), 7.12 (dates); GS1 Digital Link URI Syntax.
 */

import { lookupAi } from './ai-table.js';
import { parseBracketed, looksBracketed } from './bracketed.js';
import { looksLikeDigitalLink, parseDigitalLink } from './digital-link.js';
import { parseElementString, type ElementsResult } from './element-string.js';
import type { LintContext } from './linters.js';
import { mayCarryDigitalLink, stripSymbologyIdentifier } from './symbology.js';
import type { BarcodeParse, Gs1Form, ParseOptions, SymbologyInfo } from './types.js';
import { checkAssociations, showCharacter, validateElement } from './validate.js';

/** Digits an EAN/UPC or ITF identifier's data must have, and how many zeros make it a GTIN-14. */
const GTIN_CARRIERS: Readonly<Record<string, number>> = { ']E0': 13, ']E4': 8, ']I1': 14 };

function referenceYear(options: ParseOptions): number {
  const year = (options.referenceDate ?? new Date()).getUTCFullYear();
  return Number.isFinite(year) ? year : new Date().getUTCFullYear();
}

/** EAN-13, EAN-8 and ITF-14 carry a bare GTIN: it becomes AI 01 with its check digit verified. */
function parseGtinCarrier(
  symbology: SymbologyInfo,
  data: string,
  digits: number,
  ctx: LintContext,
): ElementsResult {
  const nonDigit = [...data].findIndex((ch) => ch < '0' || ch > '9');
  if (nonDigit >= 0) {
    const shown = showCharacter(data, nonDigit);
    return {
      elements: [],
      reason: `${symbology.name} data: character ${shown} at position ${nonDigit + 1} is not a digit`,
    };
  }
  if (data.length !== digits) {
    return {
      elements: [],
      reason: `${symbology.name} data must be ${digits} digits, got ${data.length}`,
    };
  }
  const def = lookupAi('01');
  if (!def) return { elements: [], reason: 'AI 01 is missing from the AI table' };
  const check = validateElement(def, data.padStart(14, '0'), ctx);
  return check.ok ? { elements: [check.element] } : { elements: [], reason: check.reason };
}

function parseGs1Carrier(symbology: SymbologyInfo, data: string, ctx: LintContext): ElementsResult {
  const digits = GTIN_CARRIERS[symbology.identifier];
  if (digits !== undefined) return parseGtinCarrier(symbology, data, digits, ctx);
  if (/^https?:\/\//i.test(data)) {
    return {
      elements: [],
      reason:
        `${symbology.name} (${symbology.identifier}) carries a URI; a GS1 Digital Link belongs in a plain ` +
        'QR Code or Data Matrix, not in a symbol announced as GS1 element string',
    };
  }
  if (data.includes('\\')) {
    // ECI escapes (`\000026`) are not GS1 data; no GS1 AI value may contain a backslash.
    return {
      elements: [],
      reason: `${symbology.name} (${symbology.identifier}) data holds a backslash (ECI escape); set the scanner to transmit without ECI`,
    };
  }
  return parseElementString(data, ctx);
}

function finish(
  symbology: SymbologyInfo | undefined,
  form: Gs1Form,
  result: ElementsResult,
  options: ParseOptions,
): BarcodeParse {
  const base = symbology ? { symbology, form } : { form };
  const reason =
    result.reason ??
    (options.checkPairings === false ? undefined : checkAssociations(result.elements));
  if (reason !== undefined) return { kind: 'invalid', ...base, reason, elements: result.elements };
  return { kind: 'gs1', ...base, elements: result.elements };
}

function parseUnchecked(text: string, options: ParseOptions): BarcodeParse {
  const { symbology, data } = stripSymbologyIdentifier(text);
  const ctx: LintContext = { referenceYear: referenceYear(options) };
  if (symbology?.gs1)
    return finish(symbology, 'element-string', parseGs1Carrier(symbology, data, ctx), options);
  if (mayCarryDigitalLink(symbology) && looksLikeDigitalLink(data)) {
    return finish(symbology, 'digital-link', parseDigitalLink(data, ctx), options);
  }
  if (symbology === undefined && looksBracketed(data))
    return finish(undefined, 'bracketed', parseBracketed(data, ctx), options);
  return symbology ? { kind: 'plain', symbology, data } : { kind: 'plain', data };
}

/**
 * Interprets the text of one barcode read.
 *
 * - With a GS1 symbology identifier (`]C1`, `]d2`, `]Q3`, `]e0`, `]J1`): a GS1 element string.
 *   `]E0` / `]E4` (EAN-13 / EAN-8) and `]I1` with 14 digits (ITF-14): a GTIN, as AI 01.
 * - `]Q1` / `]d1` (plain QR Code / Data Matrix) or no identifier: a GS1 Digital Link URI when the
 *   text is an http(s) URI with a GS1 primary key in its path.
 * - No identifier: the bracketed form `(01)…(10)…`.
 * - Anything else, including every other identifier: `plain`, with the identifier removed.
 *
 * GS1 data is checked in full (AI table, lengths, character sets, check digits, calendar dates,
 * requisite and invalid AI pairings, Digital Link key-qualifier order); the first problem found
 * becomes the `reason` of an `invalid` result, with the elements that were valid before it.
 *
 * Never throws: should an internal fault occur, it is reported as an `invalid` result whose reason
 * begins `internal error`.
 */
export function parseBarcode(text: string, options: ParseOptions = {}): BarcodeParse {
  try {
    return parseUnchecked(text, options);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return {
      kind: 'invalid',
      form: 'element-string',
      reason: `internal error of the GS1 parser: ${message}`,
      elements: [],
    };
  }
}

/**
 * The value of the first element with this AI in a valid GS1 parse, e.g. `elementValue(p, '21')`
 * for the serial. Returns `undefined` for `invalid` and `plain` results: data of a read that failed
 * its checks must not be used as if it were trustworthy (read `elements` of an `invalid` result
 * directly to show what was recognised).
 */
export function elementValue(parse: BarcodeParse, ai: string): string | undefined {
  if (parse.kind !== 'gs1') return undefined;
  return parse.elements.find((e) => e.ai === ai)?.value;
}
