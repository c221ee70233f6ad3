/**
 * Validation of AI values (length, character set, content checks) and of how the AIs of one read
 * go together (repeats, requisites, invalid pairs).
 *
 * Source: GS1 General Specifications 7.8 (element strings), 7.11 (character sets), 4.14 (requisite
 * and invalid AI pairings), and the GS1 Barcode Syntax Dictionary semantics of `req=` / `ex=`.
 */

import {
  aiMatchesPattern,
  describeAi,
  lookupAi,
  type AiComponent,
  type AiDefinition,
} from './ai-table.js';
import { lint, type LintContext } from './linters.js';
import type { Gs1Element } from './types.js';

/** A validated element, or the reason the value is not acceptable. */
export type ElementCheck = { ok: true; element: Gs1Element } | { ok: false; reason: string };

const CSET82 = /^[!"%&'()*+,\-./0-9:;<=>?A-Z_a-z]$/;
const CSET39 = /^[#\-/0-9A-Z]$/;
const CSET64 = /^[A-Za-z0-9_-]$/;

const CSET_NAMES: Record<AiComponent['cset'], string> = {
  N: 'digits only',
  X: 'CSET 82',
  Y: 'CSET 39',
  Z: 'CSET 64',
};

/** `'A'` for a printable character, `U+001D` for anything else, as reasons show characters. */
export function showCharacter(text: string, index: number): string {
  const code = text.codePointAt(index) ?? 0;
  if (code >= 0x21 && code <= 0x7e) return `'${String.fromCodePoint(code)}'`;
  if (code === 0x20) return "' '";
  return `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
}

function characters(n: number): string {
  return n === 1 ? '1 character' : `${n} characters`;
}

function firstBadCharacter(text: string, cset: AiComponent['cset']): number {
  for (let i = 0; i < text.length; i++) {
    const ch = text.charAt(i);
    const ok =
      cset === 'N'
        ? ch >= '0' && ch <= '9'
        : cset === 'X'
          ? CSET82.test(ch)
          : cset === 'Y'
            ? CSET39.test(ch)
            : CSET64.test(ch) || (ch === '=' && /^=*$/.test(text.slice(i)));
    if (!ok) return i;
  }
  return -1;
}

/** Places the implied decimal point: `001234` with 3 decimals → `1.234`. */
function toDecimal(digits: string, decimals: number): string {
  const padded = digits.padStart(decimals + 1, '0');
  const whole = padded.slice(0, padded.length - decimals).replace(/^0+(?=\d)/, '');
  return decimals === 0 ? whole : `${whole}.${padded.slice(padded.length - decimals)}`;
}

function lengthProblem(def: AiDefinition, length: number): string | undefined {
  const desc = describeAi(def.ai);
  if (def.minLength === def.maxLength && length !== def.maxLength) {
    return `${desc} is ${characters(length)}, must be exactly ${def.maxLength}`;
  }
  if (length > def.maxLength)
    return `${desc} is ${characters(length)}, at most ${def.maxLength} allowed`;
  if (length < def.minLength)
    return `${desc} is ${characters(length)}, at least ${def.minLength} required`;
  return undefined;
}

/**
 * Checks one AI value against its definition and builds the element (with `date` / `decimal`).
 * Lengths are checked before characters and characters before check digits, so that the reason
 * names the first thing to fix.
 */
export function validateElement(def: AiDefinition, value: string, ctx: LintContext): ElementCheck {
  const desc = describeAi(def.ai);
  if (value === '') return { ok: false, reason: `${desc} has no value` };
  const lengthIssue = lengthProblem(def, value.length);
  if (lengthIssue) return { ok: false, reason: lengthIssue };

  const dates: string[] = [];
  const times: string[] = [];
  let lastPart = '';
  let pos = 0;
  for (const [index, comp] of def.components.entries()) {
    const take = Math.min(comp.max, value.length - pos);
    if (comp.optional && take === 0) continue;
    const part = value.slice(pos, pos + take);
    if (take < comp.min) {
      const need = comp.min === comp.max ? `exactly ${comp.min}` : `at least ${comp.min}`;
      return {
        ok: false,
        reason: `${desc}: part ${index + 1} ('${part}') is ${characters(take)}, must be ${need}`,
      };
    }
    const bad = firstBadCharacter(part, comp.cset);
    if (bad >= 0) {
      const where = pos + bad + 1;
      return {
        ok: false,
        reason: `${desc}: character ${showCharacter(part, bad)} at position ${where} is not allowed (${CSET_NAMES[comp.cset]})`,
      };
    }
    for (const name of comp.linters) {
      const result = lint(name, part, ctx);
      if (!result.ok) {
        return {
          ok: false,
          reason: result.checkDigit ? `${desc} ${result.problem}` : `${desc}: ${result.problem}`,
        };
      }
      if (result.date !== undefined) dates.push(result.date);
      if (result.time !== undefined) times.push(result.time);
    }
    lastPart = part;
    pos += take;
  }

  const element: Gs1Element = { ai: def.ai, title: def.title, value };
  if (dates.length === 1)
    element.date = times.length > 0 ? `${dates[0]}T${times.join(':')}` : dates[0];
  else if (dates.length > 1) element.date = dates.join('/');
  if (def.decimals !== undefined) element.decimal = toDecimal(lastPart, def.decimals);
  return { ok: true, element };
}

function describePattern(pattern: string): string {
  return pattern.includes('n') ? `an AI ${pattern}` : describeAi(pattern);
}

function joinAlternatives(items: string[]): string {
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} or ${items[items.length - 1] ?? ''}`;
}

/**
 * Checks the AIs of one read together: an AI repeated with a different value, AIs that must not
 * appear together (`ex=`), and AIs that need another (`req=`, General Specifications 4.14).
 *
 * @returns the reason for the first violation, or `undefined` when the combination is valid.
 */
export function checkAssociations(elements: readonly Gs1Element[]): string | undefined {
  // One pass over the elements and then over the distinct AIs, so that huge inputs stay linear.
  const firstValue = new Map<string, string>();
  for (const element of elements) {
    const earlier = firstValue.get(element.ai);
    if (earlier === undefined) firstValue.set(element.ai, element.value);
    else if (earlier !== element.value) {
      return `${describeAi(element.ai)} appears twice with different values ('${earlier}' and '${element.value}')`;
    }
  }
  const present = [...firstValue.keys()];
  const presentBesides = (self: string, pattern: string): string | undefined =>
    present.find((ai) => ai !== self && aiMatchesPattern(ai, pattern));
  for (const ai of present) {
    const def = lookupAi(ai);
    if (!def) continue;
    for (const pattern of def.excludes) {
      const other = presentBesides(ai, pattern);
      if (other !== undefined)
        return `${describeAi(ai)} must not be used together with ${describeAi(other)}`;
    }
    for (const group of def.requires) {
      const satisfied = group.some((alternative) =>
        alternative.every((pattern) => presentBesides(ai, pattern) !== undefined),
      );
      if (!satisfied) {
        const options = group.map((alternative) => alternative.map(describePattern).join(' with '));
        return `${describeAi(ai)} requires ${joinAlternatives(options)}`;
      }
    }
  }
  return undefined;
}
