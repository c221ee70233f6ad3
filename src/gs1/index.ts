/**
 * GS1 parsing of barcode reads: symbology identifiers, element strings, the bracketed form and
 * GS1 Digital Link URIs, checked against the GS1 General Specifications. Pure functions.
 */

export type { BarcodeParse, Gs1Element, Gs1Form, ParseOptions, SymbologyInfo } from './types.js';
export { parseBarcode, elementValue } from './parse-barcode.js';
export { stripSymbologyIdentifier } from './symbology.js';
export { gs1CheckDigit, hasValidCheckDigit, gs1CheckCharacterPair } from './check-digit.js';
export { resolveCentury } from './dates.js';
export { lookupAi, describeAi, type AiDefinition, type AiComponent } from './ai-table.js';
export {
  canonicalReference,
  normaliseTyped,
  isIdentifyingAi,
  isPrimaryKey,
  CANONICAL_DOMAIN,
  type CanonicalReference,
} from './canonical.js';
