/**
 * One canonical identifier for a GS1 read, whatever carried it (GS1 DataMatrix, GS1-128, GS1 QR
 * Code, DataBar, bracketed text, a Digital Link URI on any domain): the GS1 Digital Link URI on
 * `https://id.gs1.org` with only the primary key and its key qualifiers in the path, e.g.
 * `https://id.gs1.org/01/09521234543213/21/C2611030001234`.
 *
 * Source: GS1 General Specifications 2 (identification keys), 3 (AI definitions), 4.14 (AI
 * pairings); GS1 Digital Link URI Syntax 1.5 section 4 (primary keys, key qualifiers and their
 * order, the canonical domain `id.gs1.org`, GTIN-14 in the path) and the key-qualifier sequences of
 * the GS1 Barcode Syntax Dictionary (`dlpkey=`). docs/configuration.md explains the choice.
 */

import { allAis, describeAi, lookupAi } from './ai-table.js';
import { GS } from './element-string.js';
import type { Gs1Element } from './types.js';

/** The domain of canonical Digital Link URIs (Digital Link URI Syntax 1.5, 4.1). */
export const CANONICAL_DOMAIN = 'https://id.gs1.org';

/**
 * Which primary key names the item when a read carries more than one: the SSCC of a logistic unit
 * before the GTIN of what it holds, then the GTIN, then the ITIP; any other key by its place.
 */
const KEY_PRIORITY = ['00', '01', '8006'];

/** Why a read got its canonical reference: for `try` and the docs. */
export interface CanonicalReference {
  /** The Digital Link URI, e.g. `https://id.gs1.org/01/09521234543213/21/C2611030001234`. */
  uri: string;
  /** The primary key and the key qualifiers kept, in path order. */
  identifying: Gs1Element[];
  /** Elements of the read left out of the reference (data attributes, and qualifiers a serial makes redundant). */
  attributes: Gs1Element[];
  /** One line for a person: which AIs identified the item and why the others were left out. */
  why: string;
}

/** Whether an AI is a Digital Link primary key (SSCC, GTIN, GRAI, GIAI, GLN, ITIP...). */
export function isPrimaryKey(ai: string): boolean {
  return lookupAi(ai)?.dlQualifiers !== undefined;
}

let qualifierSet: ReadonlySet<string> | undefined;

/**
 * The AIs worth finding an item by: every Digital Link primary key and every key qualifier (batch/lot
 * 10, serial 21, CPV 22, TPX 235, GLN extension 254...). Dates, counts and measures are not among them.
 */
export function isIdentifyingAi(ai: string): boolean {
  if (isPrimaryKey(ai)) return true;
  if (!qualifierSet) {
    const all = new Set<string>();
    for (const def of allAis())
      for (const seq of def.dlQualifiers ?? []) for (const q of seq) all.add(q);
    qualifierSet = all;
  }
  return qualifierSet.has(ai);
}

/** Percent-encodes a value for a Digital Link path: everything but RFC 3986 unreserved characters. */
function encodeValue(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

function primaryKey(elements: readonly Gs1Element[]): Gs1Element | undefined {
  for (const ai of KEY_PRIORITY) {
    const e = elements.find((x) => x.ai === ai);
    if (e) return e;
  }
  return elements.find((e) => isPrimaryKey(e.ai));
}

/**
 * The canonical reference of the elements of one valid GS1 read, or `undefined` when they hold no
 * Digital Link primary key (a read of only a serial or a batch identifies nothing on its own).
 *
 * The path keeps the primary key and its key qualifiers, in the order the Digital Link standard
 * fixes (for 01 and 8006: 22, 10, 21). When the serial (21) is present, it with the GTIN
 * already identifies one instance (General Specifications 2.1, and AI 21 in section 3: a serial is
 * unique within its GTIN), so 22 and 10 are left out and the batch/lot stays an attribute: the same pack is one item whether or not a label printed its lot. A
 * batch-level read (01 + 10, no 21) keeps 10: the batch is what it identifies.
 */
export function canonicalReference(
  elements: readonly Gs1Element[],
): CanonicalReference | undefined {
  const key = primaryKey(elements);
  if (!key) return undefined;
  const sequences = lookupAi(key.ai)?.dlQualifiers ?? [[]];
  const present = new Map(elements.map((e) => [e.ai, e] as const));
  // The allowed sequence that keeps most of what the read carries (01: 22,10,21 rather than 235).
  let best: Gs1Element[] = [];
  for (const seq of sequences) {
    let kept = seq.flatMap((ai) => (present.has(ai) ? [present.get(ai)!] : []));
    if (kept.some((e) => e.ai === '21')) kept = kept.filter((e) => e.ai === '21');
    if (kept.length > best.length) best = kept;
  }
  const identifying = [key, ...best];
  // The parsers already give GTIN-14 (EAN-13 and EAN-8 carriers padded); said again because the URI depends on it.
  const value = (e: Gs1Element) => (e.ai === '01' ? e.value.padStart(14, '0') : e.value);
  const uri = `${CANONICAL_DOMAIN}/${identifying.map((e) => `${e.ai}/${encodeValue(value(e))}`).join('/')}`;
  const attributes = elements.filter((e) => !identifying.includes(e));
  const named = (list: readonly Gs1Element[]) => list.map((e) => describeAi(e.ai)).join(', ');
  const why =
    `identified by ${named(identifying)}` +
    (attributes.length > 0 ? `; not part of the identity: ${named(attributes)}` : '') +
    (attributes.some((e) => isPrimaryKey(e.ai))
      ? ` (${describeAi(key.ai)} is the primary key of a read carrying several)`
      : '');
  return { uri, identifying, attributes, why };
}

/**
 * A GS1 read as a person may type it: the GS separator written `<GS>`, `{GS}`, `\x1d`, `\u001d`,
 * `^]` (a terminal's Ctrl-]) or as the control character itself, each turned into the real GS
 * (0x1D). Leading and trailing white space is removed. Other text is returned unchanged.
 */
export function normaliseTyped(text: string): string {
  return text.trim().replace(/<GS>|\{GS\}|\\x1[dD]|\\u001[dD]|\^\]/g, GS);
}
