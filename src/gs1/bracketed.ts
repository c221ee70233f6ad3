/**
 * Parsing of the bracketed human-readable form `(01)09521234543213(10)LOT`, as printed under a
 * barcode and as MES exports often carry GS1 data.
 *
 * Source: GS1 General Specifications 4.15 (human-readable interpretation); a `(` inside a value is
 * written `\(`, as the GS1 Barcode Syntax Engine accepts it.
 */

import { lookupAi } from './ai-table.js';
import type { ElementsResult } from './element-string.js';
import type { LintContext } from './linters.js';
import type { Gs1Element } from './types.js';
import { validateElement } from './validate.js';

/** Whether text starts like the bracketed form: `(`, 2–4 digits, `)`. */
export function looksBracketed(text: string): boolean {
  return /^\(\d{2,4}\)/.test(text);
}

/** Finds the `(` that starts the next AI at or after `from`, skipping escaped `\(`. */
function nextOpening(text: string, from: number): number {
  let at = text.indexOf('(', from);
  while (at > 0 && text.charAt(at - 1) === '\\') at = text.indexOf('(', at + 1);
  return at < 0 ? text.length : at;
}

/** Splits and validates bracketed GS1 data. */
export function parseBracketed(text: string, ctx: LintContext): ElementsResult {
  const elements: Gs1Element[] = [];
  let pos = 0;
  while (pos < text.length) {
    if (text.charAt(pos) !== '(')
      return { elements, reason: `expected '(' at position ${pos + 1}` };
    const close = text.indexOf(')', pos);
    if (close < 0) return { elements, reason: `the '(' at position ${pos + 1} is never closed` };
    const ai = text.slice(pos + 1, close);
    if (!/^\d{2,4}$/.test(ai))
      return { elements, reason: `'(${ai})' at position ${pos + 1} is not an AI (2 to 4 digits)` };
    const def = lookupAi(ai);
    if (!def) return { elements, reason: `AI ${ai} does not exist` };
    const end = nextOpening(text, close + 1);
    const value = text.slice(close + 1, end).replaceAll('\\(', '(');
    const check = validateElement(def, value, ctx);
    if (!check.ok) return { elements, reason: check.reason };
    elements.push(check.element);
    pos = end;
  }
  return { elements };
}
