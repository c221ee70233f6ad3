import { describe, expect, it } from 'vitest';
import { parseBarcode } from '../../src/gs1/index.js';

/**
 * Where the Digital Link parser meets the GS1 Barcode Syntax Engine (github.com/gs1/gs1-syntax-engine,
 * src/c-lib/dl.c, `gs1_parseDLuri`) with its defaults: the URIs below are that file's own test cases,
 * and the engine's verdict is given beside each.
 */
const OPTIONS = { referenceDate: new Date('2026-11-18T06:00:00Z') };

function elementsOf(uri: string): [string, string][] {
  const parse = parseBarcode(`]Q1${uri}`, OPTIONS);
  if (parse.kind !== 'gs1')
    throw new Error(`expected a valid GS1 parse, got ${JSON.stringify(parse)}`);
  return parse.elements.map((e) => [e.ai, e.value]);
}

function reasonOf(uri: string): string {
  const parse = parseBarcode(`]Q1${uri}`, OPTIONS);
  if (parse.kind !== 'invalid') throw new Error(`expected invalid, got ${JSON.stringify(parse)}`);
  return parse.reason;
}

describe('Digital Link against the GS1 Barcode Syntax Engine', () => {
  it('pads a GTIN-8, -12 or -13 in the query attribute 01 to GTIN-14, as the engine always does', () => {
    // Engine: "^80049520614141234567^0109520123456788", with zero-suppressed GTINs not permitted.
    expect(elementsOf('https://example.com/8004/9520614141234567?01=9520123456788')).toEqual([
      ['8004', '9520614141234567'],
      ['01', '09520123456788'],
    ]);
    expect(elementsOf('https://example.com/8004/9520614141234567?01=614141123452')).toEqual([
      ['8004', '9520614141234567'],
      ['01', '00614141123452'],
    ]);
    expect(elementsOf('https://example.com/8004/9520614141234567?01=95200002')).toEqual([
      ['8004', '9520614141234567'],
      ['01', '00000095200002'],
    ]);
  });

  it('refuses a GTIN-13 as the path key 01, as the engine does unless zero-suppressed GTINs are permitted', () => {
    // Engine: refused by default; "^0109520123456788" only with permitZeroSuppressedGTINinDLuris.
    expect(reasonOf('https://brand.example.com/01/9520123456788')).toBe(
      'Digital Link: AI 01 (GTIN) must have 14 digits, got 13',
    );
    expect(reasonOf('https://brand.example.com/some-extra/pathinfo/01/9520123456788')).toBe(
      'Digital Link: AI 01 (GTIN) must have 14 digits, got 13',
    );
    expect(elementsOf('https://id.gs1.org/01/09520123456788')).toEqual([['01', '09520123456788']]);
  });

  it('does not read the deprecated convenience alphas: such a URI carries no GS1 key, like any other', () => {
    // Engine: "No GS1 DL keys found in path info" unless permitConvenienceAlphas, which is off by
    // default and has no API. The gateway takes a URI without a GS1 key as plain data.
    for (const uri of [
      'https://a/gtin/12312312312333',
      'https://a/gtin/12312312312333/ser/ABC123',
      'https://a/sscc/006141411234567890',
    ]) {
      expect(parseBarcode(`]Q1${uri}`, OPTIONS), uri).toEqual({
        kind: 'plain',
        symbology: { identifier: ']Q1', name: 'QR Code', gs1: false },
        data: uri,
      });
    }
    // The same URIs with numeric AIs are Digital Links.
    expect(elementsOf('https://a/01/12312312312333/21/ABC123')).toEqual([
      ['01', '12312312312333'],
      ['21', 'ABC123'],
    ]);
    expect(elementsOf('https://a/00/006141411234567890')).toEqual([['00', '006141411234567890']]);
  });
});
