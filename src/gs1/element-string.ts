/**
 * Parsing of GS1 element strings as scanners transmit them (the data after a GS1 symbology
 * identifier): AIs and values one after another, with the GS character (0x1D, the transmitted form
 * of FNC1) after every value whose AI is not of predefined length.
 *
 * Source: GS1 General Specifications 7.8.4–7.8.5 (concatenation, figure 7.8.5-2 predefined-length
 * AIs), 7.8.6 (FNC1 transmitted as GS).
 */

import { aiLengthForPrefix, lookupAi } from './ai-table.js';
import type { LintContext } from './linters.js';
import type { Gs1Element } from './types.js';
import { showCharacter, validateElement } from './validate.js';

/** The transmitted form of FNC1 as a field separator. */
export const GS = '\u001d';

/** Elements read so far and, when the data is not valid, why. */
export interface ElementsResult {
  elements: Gs1Element[];
  reason?: string;
}

/**
 * Finds the AI at `pos`, or explains why there is none. AIs are found by their first two digits,
 * which fix their length; GS1 never assigns an AI that is a prefix of another.
 */
function readAi(data: string, pos: number): { ai: string } | { reason: string } {
  const first = data.slice(pos, pos + 2);
  const nonDigit = [...first].findIndex((ch) => ch < '0' || ch > '9');
  if (nonDigit >= 0) {
    return {
      reason: `expected an AI at position ${pos + 1 + nonDigit}, found ${showCharacter(data, pos + nonDigit)}`,
    };
  }
  if (first.length < 2)
    return { reason: `the data ends in the middle of an AI ('${first}') at position ${pos + 1}` };
  const length = aiLengthForPrefix(first);
  if (length === undefined) return { reason: `AI ${first} does not exist` };
  const ai = data.slice(pos, pos + length);
  if (ai.length < length)
    return { reason: `the data ends in the middle of an AI ('${ai}') at position ${pos + 1}` };
  if (!/^\d+$/.test(ai))
    return {
      reason: `'${ai}' at position ${pos + 1} is not an AI (AIs beginning ${first} have ${length} digits)`,
    };
  if (!lookupAi(ai)) return { reason: `AI ${ai} does not exist` };
  return { ai };
}

/**
 * Splits and validates an element string. Values of predefined-length AIs end after their fixed
 * length; all others run to the next GS or the end, and are never shortened to guess where a missing
 * GS might have been (`10LOT21SN1` is batch `LOT21SN1`). Tolerated: a GS after a predefined-length
 * value, a GS at the very end, and one GS at the very start (some scanners send the leading FNC1).
 */
export function parseElementString(data: string, ctx: LintContext): ElementsResult {
  const elements: Gs1Element[] = [];
  if (data === '' || data === GS)
    return { elements, reason: 'the barcode holds no GS1 data after its symbology identifier' };
  let pos = data.startsWith(GS) ? 1 : 0;
  while (pos < data.length) {
    if (data.charAt(pos) === GS) {
      return {
        elements,
        reason: `two GS separators in a row at position ${pos + 1} (an empty element)`,
      };
    }
    const found = readAi(data, pos);
    if ('reason' in found) return { elements, reason: found.reason };
    const def = lookupAi(found.ai);
    if (!def) return { elements, reason: `AI ${found.ai} does not exist` };
    const start = pos + found.ai.length;
    let end: number;
    if (def.predefinedLength) {
      // Look no further than the predefined length, so that long inputs stay linear.
      const limit = Math.min(start + def.maxLength, data.length);
      end = start;
      while (end < limit && data.charAt(end) !== GS) end++;
    } else {
      const nextGs = data.indexOf(GS, start);
      end = nextGs < 0 ? data.length : nextGs;
    }
    const check = validateElement(def, data.slice(start, end), ctx);
    if (!check.ok) return { elements, reason: check.reason };
    elements.push(check.element);
    pos = end;
    if (data.charAt(pos) === GS) pos++;
  }
  return { elements };
}
