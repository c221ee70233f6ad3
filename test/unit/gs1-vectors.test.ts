import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  elementValue,
  parseBarcode,
  stripSymbologyIdentifier,
  type BarcodeParse,
  type Gs1Element,
} from '../../src/gs1/index.js';
import { SAMPLES_DIR } from '../helpers/samples.js';

const SAMPLES = SAMPLES_DIR;
const GS = '\u001d';
/** Fixed so that two-digit years resolve the same way whenever the test runs. */
const OPTIONS = { referenceDate: new Date('2026-11-18T06:00:00Z') };

/** The `| V1 | \`...\` |` rows of gs1-vectors.md, with `<GS>` turned into the byte 0x1D. */
function vectorsFromMarkdown(): Map<string, string> {
  const text = readFileSync(`${SAMPLES}/gs1-vectors.md`, 'utf8');
  const rows = new Map<string, string>();
  for (const match of text.matchAll(/^\| ([VX]\d+) \| `([^`]*)` \|/gm)) {
    rows.set(match[1] ?? '', (match[2] ?? '').replaceAll('<GS>', GS));
  }
  return rows;
}

type Expected = Pick<Gs1Element, 'ai' | 'value'> & Partial<Gs1Element>;

const GTIN = { ai: '01', value: '09521234543213', title: 'GTIN' };

const VALID: Record<string, { identifier: string; form: string; elements: Expected[] }> = {
  V1: {
    identifier: ']d2',
    form: 'element-string',
    elements: [
      GTIN,
      { ai: '10', value: 'B2611-03', title: 'BATCH/LOT' },
      { ai: '21', value: 'C2611030001234', title: 'SERIAL' },
    ],
  },
  V2: {
    identifier: ']d2',
    form: 'element-string',
    elements: [
      GTIN,
      { ai: '11', value: '261118', title: 'PROD DATE', date: '2026-11-18' },
      { ai: '10', value: 'B2611-03' },
      { ai: '21', value: 'C2611030001234' },
    ],
  },
  V3: {
    identifier: ']d2',
    form: 'element-string',
    elements: [
      GTIN,
      { ai: '17', value: '281200', title: 'USE BY OR EXPIRY', date: '2028-12-31' },
      { ai: '10', value: 'LOT7' },
    ],
  },
  V4: {
    identifier: ']Q3',
    form: 'element-string',
    elements: [
      GTIN,
      { ai: '21', value: 'MOD-000042' },
      { ai: '240', value: 'BM-48V-16S', title: 'ADDITIONAL ID' },
    ],
  },
  V5: {
    identifier: ']Q1',
    form: 'digital-link',
    elements: [GTIN, { ai: '10', value: 'B2611-03' }, { ai: '21', value: 'PK/77' }],
  },
  V6: {
    identifier: ']Q1',
    form: 'digital-link',
    elements: [
      GTIN,
      { ai: '21', value: 'PK1' },
      { ai: '17', value: '281231', date: '2028-12-31' },
      { ai: '99', value: 'INT' },
    ],
  },
  V7: {
    identifier: ']C1',
    form: 'element-string',
    elements: [
      { ai: '00', value: '095212345678901235', title: 'SSCC' },
      { ai: '400', value: 'PO-4711', title: 'ORDER NUMBER' },
    ],
  },
  V8: {
    identifier: ']e0',
    form: 'element-string',
    elements: [
      GTIN,
      { ai: '17', value: '281231', date: '2028-12-31' },
      { ai: '10', value: '34567' },
    ],
  },
  V9: {
    identifier: ']C1',
    form: 'element-string',
    elements: [{ ai: '8004', value: '952123400001234', title: 'GIAI' }],
  },
  V10: { identifier: ']J1', form: 'element-string', elements: [GTIN, { ai: '10', value: 'LOT' }] },
  V11: { identifier: ']E0', form: 'element-string', elements: [GTIN] },
  V12: { identifier: ']d2', form: 'element-string', elements: [GTIN, { ai: '10', value: 'LOT' }] },
};

/** Each invalid vector: what its reason must say (the AI and the fault), and what was read before it. */
const INVALID: Record<string, { reason: string; before: string[] }> = {
  X1: { reason: 'AI 01 (GTIN) check digit is 4, expected 3', before: [] },
  X2: { reason: 'AI 00 (SSCC) check digit is 0, expected 5', before: [] },
  X3: { reason: 'AI 17 (USE BY OR EXPIRY): month 13 does not exist', before: ['01'] },
  X4: { reason: 'AI 17 (USE BY OR EXPIRY): 29 February 2027 does not exist', before: ['01'] },
  X5: { reason: 'AI 10 (BATCH/LOT) is 21 characters, at most 20 allowed', before: ['01'] },
  X6: { reason: 'AI 21 (SERIAL) is 24 characters, at most 20 allowed', before: ['01'] },
  X7: {
    reason: "AI 21 (SERIAL): character ' ' at position 2 is not allowed (CSET 82)",
    before: ['01'],
  },
  X8: {
    reason: 'AI 21 (SERIAL) requires AI 01 (GTIN), AI 03 (MTO GTIN) or AI 8006 (ITIP)',
    before: ['21'],
  },
  X9: { reason: 'AI 89 does not exist', before: [] },
  X10: {
    reason: 'Digital Link: key qualifier AI 10 (BATCH/LOT) must be in the path, not the query',
    before: ['01'],
  },
  X11: { reason: 'Digital Link: AI 01 (GTIN) must have 14 digits, got 13', before: [] },
};

const VECTORS = vectorsFromMarkdown();

function expectGs1(parse: BarcodeParse): Extract<BarcodeParse, { kind: 'gs1' }> {
  if (parse.kind !== 'gs1')
    throw new Error(`expected a valid GS1 parse, got ${JSON.stringify(parse)}`);
  return parse;
}

describe('gs1-vectors.md', () => {
  it('has an expectation here for every vector in the file, and the file has every vector expected here', () => {
    expect([...VECTORS.keys()].sort()).toEqual(
      [...Object.keys(VALID), ...Object.keys(INVALID)].sort(),
    );
  });

  for (const [id, expected] of Object.entries(VALID)) {
    it(`${id} is valid with the exact element values`, () => {
      const parse = expectGs1(parseBarcode(VECTORS.get(id) ?? '', OPTIONS));
      expect(parse.symbology?.identifier).toBe(expected.identifier);
      expect(parse.form).toBe(expected.form);
      expect(parse.elements).toHaveLength(expected.elements.length);
      expected.elements.forEach((want, i) => expect(parse.elements[i]).toMatchObject(want));
    });
  }

  for (const [id, expected] of Object.entries(INVALID)) {
    it(`${id} is rejected: ${expected.reason}`, () => {
      const parse = parseBarcode(VECTORS.get(id) ?? '', OPTIONS);
      if (parse.kind !== 'invalid')
        throw new Error(`expected invalid, got ${JSON.stringify(parse)}`);
      expect(parse.reason).toContain(expected.reason);
      expect(parse.elements.map((e) => e.ai)).toEqual(expected.before);
    });
  }

  it('V11: EAN-13 becomes GTIN-14 with the symbology named', () => {
    const parse = expectGs1(parseBarcode(']E09521234543213'));
    expect(parse.symbology).toEqual({ identifier: ']E0', name: 'EAN-13', gs1: true });
    expect(elementValue(parse, '01')).toBe('09521234543213');
  });

  it('the not-GS1 list passes through as plain data without the identifier', () => {
    expect(parseBarcode(']d1C24A0K3B0712345')).toEqual({
      kind: 'plain',
      symbology: { identifier: ']d1', name: 'Data Matrix', gs1: false },
      data: 'C24A0K3B0712345',
    });
    expect(parseBarcode('06QCB1AT00A1BN6B10001234')).toEqual({
      kind: 'plain',
      data: '06QCB1AT00A1BN6B10001234',
    });
    for (const noRead of ['NOREAD', 'ERROR', 'NR', 'NoRead']) {
      expect(parseBarcode(noRead)).toEqual({ kind: 'plain', data: noRead });
    }
  });

  it('the trap: a dropped GS makes the serial part of the batch, and nothing is guessed', () => {
    const parse = expectGs1(parseBarcode(']d2010952123454321310LOT21SN1'));
    expect(parse.elements.map((e) => [e.ai, e.value])).toEqual([
      ['01', '09521234543213'],
      ['10', 'LOT21SN1'],
    ]);
    expect(elementValue(parse, '21')).toBeUndefined();
  });
});

describe('real reads from the sample captures', () => {
  it('serial-capture-line3.bin: each CR-terminated read gets the verdict its content deserves', () => {
    const reads = readFileSync(`${SAMPLES}/serial-capture-line3.bin`)
      .toString('latin1')
      .split('\r')
      .filter((r) => r !== '');
    const verdicts = reads.map((r) => {
      const parse = parseBarcode(r, OPTIONS);
      return parse.kind === 'invalid'
        ? `invalid: ${parse.reason}`
        : parse.kind === 'gs1'
          ? `gs1 ${elementValue(parse, '21') ?? elementValue(parse, '00')}`
          : `plain ${parse.data}`;
    });
    expect(verdicts).toEqual([
      'gs1 C2611030001234',
      'gs1 C2611030001235',
      'plain NOREAD',
      'gs1 C2611030001236',
      'gs1 C2611030001236',
      'gs1 095212345678901235',
      'gs1 C2611030001237',
      'plain \u00ff\u00fe\u0000garbage\u0080\u0081',
      'invalid: AI 01 (GTIN) check digit is 4, expected 3',
      'plain C24A0K3B0712345',
      'plain ERROR',
    ]);
  });

  it('mqtt-reader-payloads.ndjson: GS1 QR codes with an escaped GS parse, plain cell ids stay plain', () => {
    const codes = readFileSync(`${SAMPLES}/mqtt-reader-payloads.ndjson`, 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => (JSON.parse(line) as { code: string }).code);
    const kinds = codes.map((c) => parseBarcode(c, OPTIONS));
    expect(kinds.map((k) => k.kind)).toEqual(['gs1', 'gs1', 'plain', 'plain', 'plain']);
    expect(kinds.map((k) => elementValue(k, '21'))).toEqual([
      'MOD-000042',
      'MOD-000043',
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('goods-in-export.csv: the barcode column, GS bytes inside fields, one wrong check digit', () => {
    const codes = readFileSync(`${SAMPLES}/goods-in-export.csv`, 'latin1')
      .split('\n')
      .slice(1)
      .filter((line) => line.trim() !== '')
      .map((line) => (line.split(',')[2] ?? '').replaceAll('"', ''));
    const verdicts = codes.map((c) => {
      const parse = parseBarcode(c, OPTIONS);
      return parse.kind === 'invalid'
        ? 'invalid'
        : parse.kind === 'gs1'
          ? `${elementValue(parse, '00') ?? elementValue(parse, '21')}`
          : 'plain';
    });
    expect(verdicts).toEqual([
      '095212345678901235',
      'C2611030001234',
      'C2611030001235',
      'plain',
      'invalid',
    ]);
  });
});

describe('symbology identifiers', () => {
  it.each([
    [']C1', 'GS1-128', true],
    [']d2', 'GS1 DataMatrix', true],
    [']Q3', 'GS1 QR Code', true],
    [']e0', 'GS1 DataBar', true],
    [']J1', 'GS1 DotCode', true],
    [']E0', 'EAN-13', true],
    [']E4', 'EAN-8', true],
    [']d1', 'Data Matrix', false],
    [']Q1', 'QR Code', false],
    [']C0', 'Code 128', false],
    [']A0', 'Code 39', false],
  ])('%s is %s (GS1: %s)', (identifier, name, gs1) => {
    expect(stripSymbologyIdentifier(`${identifier}123`)).toEqual({
      symbology: { identifier, name, gs1 },
      data: '123',
    });
  });

  it(']I1 is ITF-14 only with 14 digits, and then a GTIN whose check digit is verified', () => {
    expect(stripSymbologyIdentifier(']I195212345678903').symbology).toEqual({
      identifier: ']I1',
      name: 'ITF-14',
      gs1: true,
    });
    expect(expectGs1(parseBarcode(']I109521234543213')).elements).toEqual([
      { ai: '01', title: 'GTIN', value: '09521234543213' },
    ]);
    expect(parseBarcode(']I109521234543219')).toMatchObject({
      kind: 'invalid',
      reason: 'AI 01 (GTIN) check digit is 9, expected 3',
    });
    expect(parseBarcode(']I1123456')).toMatchObject({
      kind: 'plain',
      data: '123456',
      symbology: { name: 'Interleaved 2 of 5', gs1: false },
    });
  });

  it('EAN-8 becomes a GTIN-14; a wrong length or a letter in EAN data is named', () => {
    expect(elementValue(parseBarcode(']E495200002'), '01')).toBe('00000095200002');
    expect(parseBarcode(']E0952123454321')).toMatchObject({
      kind: 'invalid',
      reason: 'EAN-13 data must be 13 digits, got 12',
    });
    expect(parseBarcode(']E09521A34543213')).toMatchObject({
      kind: 'invalid',
      reason: "EAN-13 data: character 'A' at position 5 is not a digit",
    });
  });

  it('text without an identifier is returned whole', () => {
    expect(stripSymbologyIdentifier('0109521234543213')).toEqual({ data: '0109521234543213' });
    expect(stripSymbologyIdentifier(']')).toEqual({ data: ']' });
  });
});
