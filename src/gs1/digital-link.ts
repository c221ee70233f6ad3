/**
 * Parsing of GS1 Digital Link URIs: `https://id.example.com/01/09521234543213/10/LOT/21/SN?17=281231`.
 * The path holds a primary key and its key qualifiers in a fixed order; the query holds data
 * attributes keyed by AI; query parameters that are not all digits are ignored.
 *
 * Source: GS1 Digital Link URI Syntax 1.5 (sections 4–6) and the key qualifier sequences of the
 * GS1 Barcode Syntax Dictionary (`dlpkey=`), checked the way the GS1 Barcode Syntax Engine does
 * (github.com/gs1/gs1-syntax-engine, `src/c-lib/dl.c`) with its default settings, which this parser
 * has no switch to change:
 *
 * - AI 01 in the path must have 14 digits; the engine pads a GTIN-8, -12 or -13 there only with
 *   `permitZeroSuppressedGTINinDLuris`, off by default. As the query attribute 01 (behind another
 *   key, `/8004/…?01=9520123456788`) the engine always pads it to GTIN-14, and so does this parser.
 * - The deprecated convenience alphas (`/gtin/…`, `/ser/…`, `/sscc/…`) are not read: the engine
 *   reads them only with `permitConvenienceAlphas`, off by default and without an API, and refuses
 *   such a URI for having no GS1 key in its path. Here a URI without a GS1 key is plain data.
 */

import { describeAi, lookupAi, type AiDefinition } from './ai-table.js';
import type { ElementsResult } from './element-string.js';
import type { LintContext } from './linters.js';
import type { Gs1Element } from './types.js';
import { showCharacter, validateElement } from './validate.js';

const SCHEME = /^(?:https?|HTTPS?):\/\//;
const URI_CHARACTER = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]$/;
const BAD_DOMAIN_CHARACTER = /[_~?#@!$&'()*+,;=%]/;

interface UriParts {
  domain: string;
  /** Path segments after the domain. */
  segments: string[];
  query: string | undefined;
  /** Index in `segments` of the primary key AI. */
  keyIndex: number;
}

function isPrimaryKey(segment: string): boolean {
  return /^\d{2,4}$/.test(segment) && lookupAi(segment)?.dlQualifiers !== undefined;
}

/**
 * Splits a URI and finds its primary key by walking `/AI/value` pairs back from the end of the path,
 * so that a path prefix before the key (`/products/01/…`) is allowed.
 */
function splitUri(text: string): UriParts | undefined {
  const scheme = SCHEME.exec(text);
  if (!scheme) return undefined;
  const rest = text.slice(scheme[0].length);
  const slash = rest.indexOf('/');
  if (slash < 1) return undefined;
  let pathAndQuery = rest.slice(slash);
  const hash = pathAndQuery.indexOf('#');
  if (hash >= 0) pathAndQuery = pathAndQuery.slice(0, hash);
  const question = pathAndQuery.indexOf('?');
  const path = question >= 0 ? pathAndQuery.slice(0, question) : pathAndQuery;
  const segments = path.slice(1).split('/');
  for (let i = segments.length - 2; i >= 0; i -= 2) {
    const segment = segments[i] ?? '';
    if (!/^\d{2,4}$/.test(segment) || !lookupAi(segment)) break;
    if (isPrimaryKey(segment)) {
      const query = question >= 0 ? pathAndQuery.slice(question + 1) : undefined;
      return { domain: rest.slice(0, slash), segments, query, keyIndex: i };
    }
  }
  return undefined;
}

/** Whether text is an http(s) URI whose path holds a GS1 Digital Link primary key. */
export function looksLikeDigitalLink(text: string): boolean {
  return splitUri(text) !== undefined;
}

/** Percent-decoding as the Digital Link standard applies it; `+` means space only in the query. */
function percentDecode(text: string, inQuery: boolean): string {
  return text.replace(/%([0-9A-Fa-f]{2})|\+/g, (match: string, hex: string | undefined) => {
    if (hex !== undefined) return String.fromCharCode(parseInt(hex, 16));
    return inQuery ? ' ' : match;
  });
}

/** Whether `qualifiers` follow one of the key's allowed sequences, in order, each at most once. */
function isValidSequence(key: AiDefinition, qualifiers: readonly string[]): boolean {
  return (key.dlQualifiers ?? []).some((allowed) => {
    let at = 0;
    for (const q of qualifiers) {
      const found = allowed.indexOf(q, at);
      if (found < 0) return false;
      at = found + 1;
    }
    return true;
  });
}

function sequenceProblem(key: AiDefinition, qualifiers: readonly string[]): string {
  const allowed = (key.dlQualifiers ?? []).map((seq) => seq.join(', ')).filter((s) => s !== '');
  const stranger = qualifiers.find((q) => !(key.dlQualifiers ?? []).some((seq) => seq.includes(q)));
  const keyDesc = describeAi(key.ai);
  if (allowed.length === 0)
    return `Digital Link: ${keyDesc} takes no key qualifiers in the path; put other AIs in the query`;
  if (stranger !== undefined) {
    return (
      `Digital Link: ${describeAi(stranger)} is not a key qualifier of ${keyDesc}; ` +
      `only AIs ${allowed.join(' or ')} may follow it in the path, others belong in the query`
    );
  }
  return `Digital Link: the key qualifiers of ${keyDesc} must appear in the order ${allowed.join(' or ')}; got ${qualifiers.join(', ')}`;
}

/** Decodes and validates one value, applying the Digital Link rules that element strings lack. */
function decodeValue(
  def: AiDefinition,
  raw: string,
  inQuery: boolean,
  ctx: LintContext,
): { element: Gs1Element } | { reason: string } {
  const where = inQuery ? 'query' : 'path';
  if (raw === '')
    return { reason: `Digital Link: ${describeAi(def.ai)} has an empty value in the ${where}` };
  let value = percentDecode(raw, inQuery);
  if (value.includes('\u0000'))
    return {
      reason: `Digital Link: the value of ${describeAi(def.ai)} holds a NUL character (%00)`,
    };
  if (def.ai === '01') {
    // GTIN-14 in the path; in the query the engine pads a zero-suppressed GTIN (module comment).
    if (inQuery && /^(\d{8}|\d{12}|\d{13})$/.test(value)) value = value.padStart(14, '0');
    if (/^\d*$/.test(value) && value.length !== 14) {
      return {
        reason: `Digital Link: ${describeAi('01')} must have 14 digits, got ${value.length}`,
      };
    }
  }
  const check = validateElement(def, value, ctx);
  return check.ok ? { element: check.element } : { reason: check.reason };
}

/**
 * Parses and validates a GS1 Digital Link URI. Call only when {@link looksLikeDigitalLink} is true;
 * otherwise returns a reason saying no primary key was found.
 */
export function parseDigitalLink(text: string, ctx: LintContext): ElementsResult {
  const elements: Gs1Element[] = [];
  const parts = splitUri(text);
  if (!parts)
    return {
      elements,
      reason: 'Digital Link: no GS1 primary key (such as /01/ or /00/) found in the path',
    };
  for (let i = 0; i < text.length; i++) {
    if (!URI_CHARACTER.test(text.charAt(i))) {
      return {
        elements,
        reason: `Digital Link: character ${showCharacter(text, i)} at position ${i + 1} is not allowed in a URI`,
      };
    }
  }
  const badDomain = BAD_DOMAIN_CHARACTER.exec(parts.domain);
  if (badDomain)
    return {
      elements,
      reason: `Digital Link: the domain '${parts.domain}' must not contain '${badDomain[0]}'`,
    };

  const keyDef = lookupAi(parts.segments[parts.keyIndex] ?? '');
  if (!keyDef) return { elements, reason: 'Digital Link: no GS1 primary key found in the path' };
  const pathAis: string[] = [];
  for (let i = parts.keyIndex; i + 1 < parts.segments.length; i += 2) {
    const def = lookupAi(parts.segments[i] ?? '');
    if (!def)
      return {
        elements,
        reason: `Digital Link: '${parts.segments[i] ?? ''}' in the path is not an AI`,
      };
    const decoded = decodeValue(def, parts.segments[i + 1] ?? '', false, ctx);
    if ('reason' in decoded) return { elements, reason: decoded.reason };
    elements.push(decoded.element);
    pathAis.push(def.ai);
  }
  const qualifiers = pathAis.slice(1);
  if (!isValidSequence(keyDef, qualifiers))
    return { elements, reason: sequenceProblem(keyDef, qualifiers) };

  for (const param of (parts.query ?? '').split('&')) {
    const eq = param.indexOf('=');
    if (eq < 0) continue;
    const key = param.slice(0, eq);
    if (!/^\d+$/.test(key)) continue; // not an AI: other query parameters are the resolver's business
    const def = lookupAi(key);
    if (!def) return { elements, reason: `Digital Link: AI ${key} in the query does not exist` };
    // A query AI that would form a valid key-qualifier sequence at some place in the path belongs there.
    for (let at = 0; at <= qualifiers.length; at++) {
      const trial = [...qualifiers.slice(0, at), key, ...qualifiers.slice(at)];
      if (isValidSequence(keyDef, trial)) {
        return {
          elements,
          reason: `Digital Link: key qualifier ${describeAi(key)} must be in the path, not the query`,
        };
      }
    }
    if (elements.some((e) => e.ai === key))
      return { elements, reason: `Digital Link: ${describeAi(key)} appears more than once` };
    if (!def.dlAttribute)
      return {
        elements,
        reason: `Digital Link: ${describeAi(key)} is not allowed as a query attribute`,
      };
    const decoded = decodeValue(def, param.slice(eq + 1), true, ctx);
    if ('reason' in decoded) return { elements, reason: decoded.reason };
    elements.push(decoded.element);
  }
  return { elements };
}
