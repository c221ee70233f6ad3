/**
 * AIM symbology identifiers (ISO/IEC 15424): the three characters `]` + code letter + modifier
 * that a scanner can put in front of what it read, telling which symbology was read and, through
 * the modifier, whether the symbol carries GS1 data (FNC1 in first position).
 *
 * Source: GS1 General Specifications 5.1.2 and figure 5.4.6-1 ("symbology identifiers for GS1
 * data carriers"), ISO/IEC 15424.
 */

import type { SymbologyInfo } from './types.js';

/** Identifiers that announce GS1 data (GS1 General Specifications figure 5.4.6-1). */
const GS1_IDENTIFIERS: Readonly<Record<string, string>> = {
  ']C1': 'GS1-128',
  ']d2': 'GS1 DataMatrix',
  ']d5': 'GS1 DataMatrix (ECI)',
  ']Q3': 'GS1 QR Code',
  ']Q4': 'GS1 QR Code (ECI)',
  ']e0': 'GS1 DataBar',
  ']J1': 'GS1 DotCode',
  ']E0': 'EAN-13',
  ']E4': 'EAN-8',
};

/** Names of other identifiers worth showing by name; the rest are named by their code letter. */
const OTHER_IDENTIFIERS: Readonly<Record<string, string>> = {
  ']E1': 'UPC/EAN two-digit add-on',
  ']E2': 'UPC/EAN five-digit add-on',
  ']E3': 'EAN-13 with add-on',
  ']I0': 'Interleaved 2 of 5',
  ']I3': 'Interleaved 2 of 5',
};

const SYMBOLOGY_BY_LETTER: Readonly<Record<string, string>> = {
  A: 'Code 39',
  C: 'Code 128',
  d: 'Data Matrix',
  E: 'EAN/UPC',
  e: 'GS1 DataBar',
  F: 'Codabar',
  G: 'Code 93',
  H: 'Code 11',
  I: 'Interleaved 2 of 5',
  J: 'DotCode',
  K: 'Code 16K',
  L: 'PDF417',
  M: 'MSI',
  O: 'Codablock',
  Q: 'QR Code',
  R: 'Straight 2 of 5',
  S: 'Straight 2 of 5',
  U: 'MaxiCode',
  X: 'other symbology',
  z: 'Aztec Code',
};

const IDENTIFIER = /^\][A-Za-z][0-9A-Za-z]/;

/**
 * Splits a read into its AIM symbology identifier and the data after it.
 *
 * `]I1` (Interleaved 2 of 5 with a verified check digit) counts as GS1 (ITF-14) only when the data
 * is exactly 14 digits. Text that does not start with `]`, a letter and a modifier character has no
 * identifier and is returned whole.
 */
export function stripSymbologyIdentifier(text: string): {
  symbology?: SymbologyInfo;
  data: string;
} {
  if (!IDENTIFIER.test(text)) return { data: text };
  const identifier = text.slice(0, 3);
  const data = text.slice(3);
  const gs1Name = GS1_IDENTIFIERS[identifier];
  if (gs1Name !== undefined) return { symbology: { identifier, name: gs1Name, gs1: true }, data };
  if (identifier === ']I1') {
    const itf14 = /^\d{14}$/.test(data);
    return {
      symbology: { identifier, name: itf14 ? 'ITF-14' : 'Interleaved 2 of 5', gs1: itf14 },
      data,
    };
  }
  const name =
    OTHER_IDENTIFIERS[identifier] ??
    SYMBOLOGY_BY_LETTER[identifier.charAt(1)] ??
    `AIM symbology ${identifier}`;
  return { symbology: { identifier, name, gs1: false }, data };
}

/**
 * Whether data under this identifier may be a GS1 Digital Link URI: plain QR Code and Data Matrix
 * (GS1 General Specifications 5.7 and 5.6 allow Digital Link URIs only in those, without FNC1).
 */
export function mayCarryDigitalLink(symbology: SymbologyInfo | undefined): boolean {
  return (
    symbology === undefined || symbology.identifier === ']Q1' || symbology.identifier === ']d1'
  );
}
