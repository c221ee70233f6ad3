import { describe, expect, it } from 'vitest';
import {
  canonicalReference,
  isIdentifyingAi,
  normaliseTyped,
  parseBarcode,
  type BarcodeParse,
} from '../../src/gs1/index.js';

/** The canonical GS1 reference (src/gs1/canonical.ts), with GS1's own examples named by their source. */

const GS = '\u001d';

function canonical(text: string): string | undefined {
  // Pairings off: a serial alone is not a valid label, but it is something a person may type.
  const parse: BarcodeParse = parseBarcode(text, {
    referenceDate: new Date('2026-11-24T00:00:00Z'),
    checkPairings: false,
  });
  if (parse.kind !== 'gs1')
    throw new Error(
      `not valid GS1: ${text} (${parse.kind === 'invalid' ? parse.reason : 'plain'})`,
    );
  return canonicalReference(parse.elements)?.uri;
}

describe('canonical GS1 reference', () => {
  const pack = 'https://id.gs1.org/01/09521234543213/21/C2611030001234';

  it('gives one reference for the same pack read as GS1 DataMatrix, GS1-128, a QR Digital Link and bracketed text', () => {
    // GTIN 09521234543213: the example GTIN used throughout the GS1 General Specifications (sections 2 and 3).
    const carriers = [
      `]d2010952123454321310B2611-03${GS}21C2611030001234`, // GS1 DataMatrix, batch before serial
      `]C1010952123454321321C2611030001234${GS}10B2611-03`, // GS1-128, serial before batch
      ']Q1https://id.gs1.org/01/09521234543213/10/B2611-03/21/C2611030001234', // plain QR Code with a Digital Link
      'https://brand.example.com/dpp/01/09521234543213/21/C2611030001234?17=281231', // Digital Link on a brand's domain, with a path prefix
      '(01)09521234543213(10)B2611-03(21)C2611030001234', // the human-readable line under the symbol
      `]e0010952123454321310B2611-03${GS}21C2611030001234`, // GS1 DataBar Expanded
      `]Q3010952123454321321C2611030001234${GS}17281231`, // GS1 QR Code with an expiry date
    ];
    for (const c of carriers) expect(canonical(c), c).toBe(pack);
  });

  it('follows the Digital Link URI Syntax examples: the canonical domain, the key and the qualifiers it keeps', () => {
    // GS1 Digital Link URI Syntax 1.5, section 4 examples.
    expect(canonical('https://id.gs1.org/01/09520123456788/10/ABC123/21/12345')).toBe(
      'https://id.gs1.org/01/09520123456788/21/12345',
    );
    const full = parseBarcode(
      'https://example.com/01/09520123456788/22/2A/10/ABC%2F123/21/12345?17=180426',
      { referenceDate: new Date('2026-01-01T00:00:00Z') },
    );
    expect(full.kind).toBe('gs1');
    const c = canonicalReference(full.kind === 'gs1' ? full.elements : [])!;
    expect(c.uri).toBe('https://id.gs1.org/01/09520123456788/21/12345');
    expect(c.identifying.map((e) => e.ai)).toEqual(['01', '21']);
    expect(c.attributes.map((e) => e.ai)).toEqual(['22', '10', '17']);
    expect(c.why).toBe(
      'identified by AI 01 (GTIN), AI 21 (SERIAL); not part of the identity: AI 22 (CPV), AI 10 (BATCH/LOT), AI 17 (USE BY OR EXPIRY)',
    );
  });

  it('keeps the lot of a batch-level read (no serial) and the CPV, percent-encoding values as the standard does', () => {
    expect(canonical('https://example.com/01/09520123456788/10/ABC%2F123')).toBe(
      'https://id.gs1.org/01/09520123456788/10/ABC%2F123',
    );
    expect(canonical('(01)09520123456788(22)2A(10)ABC/123')).toBe(
      'https://id.gs1.org/01/09520123456788/22/2A/10/ABC%2F123',
    );
    expect(canonical('(01)09521234543213(17)281231')).toBe('https://id.gs1.org/01/09521234543213');
  });

  it('pads a GTIN-13 from EAN-13 to 14 digits, and prefers the SSCC of a logistic unit to the GTIN it contains', () => {
    expect(canonical(']E09521234543213')).toBe('https://id.gs1.org/01/09521234543213');
    // SSCC 106141411234567897: the example SSCC of the GS1 General Specifications (section 3.2, AI 00; check digit 7).
    expect(canonical(']C100106141411234567897')).toBe('https://id.gs1.org/00/106141411234567897');
    const logistic = parseBarcode(`]C1001061414112345678970209521234543213${GS}3710`);
    expect(logistic.kind).toBe('gs1');
    const c = canonicalReference(logistic.kind === 'gs1' ? logistic.elements : [])!;
    expect(c.uri).toBe('https://id.gs1.org/00/106141411234567897');
    expect(c.why).toContain('not part of the identity: AI 02 (CONTENT), AI 37 (COUNT)');
  });

  it('gives no canonical reference to a read without a primary key (a serial or a lot alone)', () => {
    expect(canonical('(21)C2611030001234')).toBeUndefined();
    expect(canonical('(10)B2611-03')).toBeUndefined();
  });

  it('indexes the primary keys and key qualifiers, not dates, counts or measures', () => {
    expect(
      ['00', '01', '10', '21', '22', '235', '254', '8003', '8004', '8006', '414'].filter(
        (ai) => !isIdentifyingAi(ai),
      ),
    ).toEqual([]);
    expect(
      ['11', '17', '30', '37', '3103', '400', '240'].filter((ai) => isIdentifyingAi(ai)),
    ).toEqual([]);
  });

  it('turns the GS as a person types it into the real GS', () => {
    for (const typed of ['<GS>', '{GS}', '\\x1d', '\\x1D', '\\u001d', '^]', GS]) {
      expect(normaliseTyped(` ]d2010952123454321310B2611-03${typed}21C2611030001234 `)).toBe(
        `]d2010952123454321310B2611-03${GS}21C2611030001234`,
      );
    }
  });
});
