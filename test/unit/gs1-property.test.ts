import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  describeAi,
  elementValue,
  gs1CheckCharacterPair,
  gs1CheckDigit,
  hasValidCheckDigit,
  lookupAi,
  parseBarcode,
  resolveCentury,
  type BarcodeParse,
} from '../../src/gs1/index.js';
import { allAis } from '../../src/gs1/ai-table.js';

const GS = '\u001d';
const OPTIONS = { referenceDate: new Date('2026-11-18T06:00:00Z') };
const CSET82 =
  '!"%&\'()*+,-./0123456789:;<=>?ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
const PREFIXES = [
  '',
  ']d2',
  ']C1',
  ']Q3',
  ']e0',
  ']J1',
  ']E0',
  ']E4',
  ']I1',
  ']Q1',
  ']d1',
  ']d5',
  ']C0',
  '(',
  'https://a/01/',
  'HTTP://x.y/00/',
];

/** Every result must be one of the three kinds, well formed, and never an internal fault. */
function assertWellFormed(parse: BarcodeParse): void {
  expect(['gs1', 'invalid', 'plain']).toContain(parse.kind);
  if (parse.kind === 'invalid') {
    expect(parse.reason.length).toBeGreaterThan(0);
    expect(parse.reason).not.toMatch(/^internal error/);
    expect(Array.isArray(parse.elements)).toBe(true);
  }
  if (parse.kind === 'plain') expect(typeof parse.data).toBe('string');
}

const gtin14 = fc
  .array(fc.integer({ min: 0, max: 9 }), { minLength: 13, maxLength: 13 })
  .map((digits) => digits.join(''))
  .map((body) => `${body}${gs1CheckDigit(body)}`);
const cset82Text = (max: number) =>
  fc
    .array(fc.constantFrom(...CSET82), { minLength: 1, maxLength: max })
    .map((chars) => chars.join(''));

describe('parseBarcode never throws', () => {
  it('on arbitrary strings', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PREFIXES),
        fc.string({ unit: 'binary', maxLength: 120 }),
        (prefix, text) => {
          assertWellFormed(parseBarcode(prefix + text));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('on arbitrary bytes decoded as latin1 and as UTF-8', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 160 }), (bytes) => {
        const buffer = Buffer.from(bytes);
        assertWellFormed(parseBarcode(buffer.toString('latin1')));
        assertWellFormed(parseBarcode(buffer.toString('utf8')));
      }),
      { numRuns: 2000 },
    );
  });

  it('on strings built from GS1-like pieces (reaches deep into the parsers)', () => {
    const piece = fc.constantFrom(
      '01',
      '10',
      '17',
      '21',
      '00',
      '8004',
      '3103',
      '422',
      '8006',
      '/',
      '?',
      '&',
      '=',
      '%2F',
      '%0',
      GS,
      '(',
      ')',
      '\\(',
      '9',
      '0',
      'A',
      ' ',
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...PREFIXES),
        fc.array(piece, { maxLength: 30 }),
        fc.date({ noInvalidDate: false }),
        (prefix, pieces, date) => {
          assertWellFormed(parseBarcode(prefix + pieces.join(''), { referenceDate: date }));
        },
      ),
      { numRuns: 3000 },
    );
  });
});

describe('valid generated element strings round-trip', () => {
  it('GTIN with computed check digit + batch (+ serial) in every GS1 form', () => {
    fc.assert(
      fc.property(
        gtin14,
        cset82Text(20),
        fc.option(cset82Text(20), { nil: undefined }),
        (gtin, batch, serial) => {
          const want = [
            ['01', gtin],
            ['10', batch],
            ...(serial === undefined ? [] : [['21', serial]]),
          ];
          const elementString = `]d201${gtin}10${batch}${serial === undefined ? '' : `${GS}21${serial}`}`;
          const bracketed = `(01)${gtin}(10)${batch.replaceAll('(', '\\(')}${serial === undefined ? '' : `(21)${serial.replaceAll('(', '\\(')}`}`;
          const link = `https://id.example.com/01/${gtin}/10/${encodeURIComponent(batch)}${serial === undefined ? '' : `/21/${encodeURIComponent(serial)}`}`;
          for (const text of [elementString, bracketed, link]) {
            const parse = parseBarcode(text, OPTIONS);
            if (parse.kind !== 'gs1')
              throw new Error(`${JSON.stringify(text)} → ${JSON.stringify(parse)}`);
            expect(parse.elements.map((e) => [e.ai, e.value])).toEqual(want);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('a wrong check digit is always caught and named', () => {
    fc.assert(
      fc.property(gtin14, fc.integer({ min: 1, max: 9 }), (gtin, delta) => {
        const wrong = `${gtin.slice(0, 13)}${(Number(gtin.slice(13)) + delta) % 10}`;
        const parse = parseBarcode(`]d201${wrong}`);
        expect(parse).toMatchObject({
          kind: 'invalid',
          reason: `AI 01 (GTIN) check digit is ${wrong.slice(13)}, expected ${gtin.slice(13)}`,
        });
      }),
    );
  });
});

describe('check digits (General Specifications 7.9)', () => {
  it('known keys', () => {
    expect(gs1CheckDigit('0952123454321')).toBe(3);
    expect(gs1CheckDigit('09521234567890123')).toBe(5);
    expect(gs1CheckDigit('629104150021')).toBe(3); // GTIN-13 6291041500213
    expect(gs1CheckDigit('9520000')).toBe(2); // GTIN-8
    expect(hasValidCheckDigit('09521234543213')).toBe(true);
    expect(hasValidCheckDigit('09521234543214')).toBe(false);
    expect(hasValidCheckDigit('095212345678901235')).toBe(true);
  });

  it('rejects what is not digits', () => {
    expect(gs1CheckDigit('')).toBe(-1);
    expect(gs1CheckDigit('12a4')).toBe(-1);
    expect(hasValidCheckDigit('7')).toBe(false);
    expect(hasValidCheckDigit('１２')).toBe(false);
  });

  it('appending the computed digit always validates, any other digit never does', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 1, maxLength: 20 }),
        fc.integer({ min: 1, max: 9 }),
        (digits, delta) => {
          const body = digits.join('');
          const check = gs1CheckDigit(body);
          expect(hasValidCheckDigit(`${body}${check}`)).toBe(true);
          expect(hasValidCheckDigit(`${body}${(check + delta) % 10}`)).toBe(false);
        },
      ),
    );
  });

  it('alphanumeric check character pairs (GMN, 7.9.5)', () => {
    expect(gs1CheckCharacterPair('1987654Ad4X4bL5ttr2310c')).toBe('2K');
    expect(gs1CheckCharacterPair('12345678901234567890123')).toBe('NT');
    expect(parseBarcode(']d280131987654Ad4X4bL5ttr2310c2K').kind).toBe('gs1');
    expect(parseBarcode(']d280131987654Ad4X4bL5ttr2310cXK')).toMatchObject({
      kind: 'invalid',
      reason: 'AI 8013 (GMN) check characters are XK, expected 2K',
    });
  });
});

describe('century of YY dates (General Specifications 7.12)', () => {
  it.each([
    [26, 2026, 2026],
    [76, 2026, 2076], // 50 years ahead: still this century
    [77, 2026, 1977], // 51 ahead: previous century
    [0, 2026, 2000],
    [99, 2026, 1999],
    [51, 2000, 1951],
    [50, 2000, 2050],
    [49, 2099, 2149], // 50 behind: next century
    [50, 2099, 2050],
    [0, 2099, 2100],
  ])('YY %i read in %i is %i', (yy, reference, year) => {
    expect(resolveCentury(yy, reference)).toBe(year);
  });

  it('the reference date decides the century of a parsed date', () => {
    const read = (year: number) =>
      parseBarcode(']d201095212345432131777010110X', {
        referenceDate: new Date(Date.UTC(year, 5, 1)),
      });
    expect(read(2026)).toMatchObject({
      kind: 'gs1',
      elements: [{}, { ai: '17', date: '1977-01-01' }, { ai: '10', value: 'X' }],
    });
    expect(read(2030)).toMatchObject({
      kind: 'gs1',
      elements: [{}, { ai: '17', date: '2077-01-01' }, {}],
    });
  });
});

describe('dates', () => {
  it('day 00 means the last day of the month, leap years included', () => {
    const date = (yymmdd: string) => {
      const parse = parseBarcode(`]d2010952123454321315${yymmdd}`, OPTIONS);
      return parse.kind === 'gs1'
        ? parse.elements[1]?.date
        : parse.kind === 'invalid'
          ? parse.reason
          : 'plain';
    };
    expect(date('280200')).toBe('2028-02-29');
    expect(date('270200')).toBe('2027-02-28');
    expect(date('280229')).toBe('2028-02-29');
    expect(date('270431')).toBe(
      'AI 15 (BEST BEFORE or BEST BY): 31 April 2027 does not exist (270431)',
    );
    expect(date('271300')).toBe('AI 15 (BEST BEFORE or BEST BY): month 13 does not exist (271300)');
    expect(date('270001')).toBe('AI 15 (BEST BEFORE or BEST BY): month 00 does not exist (270001)');
  });

  it('day 00 is refused where GS1 does not allow it, and date-times carry their time', () => {
    expect(parseBarcode(']d2010952123454321370032701001430', OPTIONS)).toMatchObject({
      kind: 'invalid',
      reason: 'AI 7003 (EXPIRY TIME): day 00 is not allowed in this date (270100)',
    });
    expect(parseBarcode(']d2010952123454321370032701311430', OPTIONS)).toMatchObject({
      kind: 'gs1',
      elements: [{}, { ai: '7003', date: '2027-01-31T14:30' }],
    });
    expect(parseBarcode(']d2010952123454321370032701312430', OPTIONS)).toMatchObject({
      kind: 'invalid',
      reason: 'AI 7003 (EXPIRY TIME): hour 24 does not exist',
    });
  });
});

describe('element strings', () => {
  it('measures carry their decimal value', () => {
    const parse = parseBarcode(']C10109521234543213310300123433020005033122000050', OPTIONS);
    expect(parse).toMatchObject({
      kind: 'gs1',
      elements: [
        {},
        { ai: '3103', decimal: '1.234', title: 'NET WEIGHT (kg)' },
        { ai: '3302', decimal: '5.03' },
        { ai: '3122', decimal: '0.50' },
      ],
    });
  });

  it('a GS after a predefined-length AI and at the end is tolerated; two in a row are not', () => {
    expect(parseBarcode(`]d2${GS}0109521234543213${GS}10A${GS}`).kind).toBe('gs1');
    expect(parseBarcode(`]d20109521234543213${GS}10A${GS}${GS}21B`)).toMatchObject({
      kind: 'invalid',
      reason: 'two GS separators in a row at position 22 (an empty element)',
    });
  });

  it('a fixed-length AI that needs a GS is not cut short to guess a missing one', () => {
    expect(parseBarcode(']d2010952123454321342227610LOT')).toMatchObject({
      kind: 'invalid',
      reason: 'AI 422 (ORIGIN) is 8 characters, must be exactly 3',
    });
    expect(parseBarcode(`]d20109521234543213422999${GS}10LOT`)).toMatchObject({
      kind: 'invalid',
      reason: 'AI 422 (ORIGIN): 999 is not an ISO 3166 country code',
    });
    expect(parseBarcode(`]d20109521234543213422276${GS}10LOT`).kind).toBe('gs1');
  });

  it('names what is wrong where the data ends early or holds no AI', () => {
    expect(parseBarcode(']d2')).toMatchObject({
      kind: 'invalid',
      reason: 'the barcode holds no GS1 data after its symbology identifier',
    });
    expect(parseBarcode(']d2010952123454')).toMatchObject({
      kind: 'invalid',
      reason: 'AI 01 (GTIN) is 10 characters, must be exactly 14',
    });
    expect(parseBarcode(']d2A1')).toMatchObject({
      kind: 'invalid',
      reason: "expected an AI at position 1, found 'A'",
    });
    expect(parseBarcode(`]d20109521234543213${GS}2`)).toMatchObject({
      kind: 'invalid',
      reason: "the data ends in the middle of an AI ('2') at position 18",
    });
    expect(parseBarcode(']d23109123456')).toMatchObject({
      kind: 'invalid',
      reason: 'AI 3109 does not exist',
    });
    expect(parseBarcode(']d210')).toMatchObject({
      kind: 'invalid',
      reason: 'AI 10 (BATCH/LOT) has no value',
    });
    expect(parseBarcode(`]d2010952123454321310\r`)).toMatchObject({
      kind: 'invalid',
      reason: 'AI 10 (BATCH/LOT): character U+000D at position 1 is not allowed (CSET 82)',
    });
  });

  it('pairings: requisites, exclusions and repeated AIs', () => {
    expect(parseBarcode(']C10209521234543213')).toMatchObject({
      kind: 'invalid',
      reason: 'AI 02 (CONTENT) requires AI 37 (COUNT)',
    });
    expect(parseBarcode(`]C10209521234543213375${GS}`)).toMatchObject({
      kind: 'invalid',
      reason:
        'AI 37 (COUNT) requires AI 00 (SSCC) with AI 02 (CONTENT) or AI 00 (SSCC) with AI 8026 (ITIP CONTENT)',
    });
    expect(parseBarcode(`]C10009521234567890123502095212345432133712`).kind).toBe('gs1');
    expect(parseBarcode(`]d20109521234543213250X`)).toMatchObject({
      kind: 'invalid',
      reason:
        'AI 250 (SECONDARY SERIAL) requires AI 01 (GTIN) with AI 21 (SERIAL), AI 03 (MTO GTIN) with AI 21 (SERIAL) or AI 8006 (ITIP) with AI 21 (SERIAL)',
    });
    expect(parseBarcode(`]d2010952123454321331030000013102000000`)).toMatchObject({
      kind: 'invalid',
      reason: 'AI 3103 (NET WEIGHT (kg)) must not be used together with AI 3102 (NET WEIGHT (kg))',
    });
    expect(parseBarcode(`]d201095212345432130209521234543213`)).toMatchObject({
      kind: 'invalid',
      reason: 'AI 02 (CONTENT) must not be used together with AI 01 (GTIN)',
    });
    expect(parseBarcode(`]d2010952123454321310A${GS}10B`)).toMatchObject({
      kind: 'invalid',
      reason: "AI 10 (BATCH/LOT) appears twice with different values ('A' and 'B')",
    });
    expect(parseBarcode(`]d2010952123454321310A${GS}10A`).kind).toBe('gs1');
    expect(parseBarcode(']d221C26', { checkPairings: false }).kind).toBe('gs1');
  });
});

describe('bracketed form and Digital Link', () => {
  it('bracketed: escaped brackets, unknown AIs, empty values', () => {
    expect(elementValue(parseBarcode('(01)09521234543213(10)A\\(B'), '10')).toBe('A(B');
    expect(parseBarcode('(01)09521234543213(89)X')).toMatchObject({
      kind: 'invalid',
      form: 'bracketed',
      reason: 'AI 89 does not exist',
    });
    expect(parseBarcode('(01)09521234543213(10)')).toMatchObject({
      kind: 'invalid',
      reason: 'AI 10 (BATCH/LOT) has no value',
    });
    expect(parseBarcode('(1)23').kind).toBe('plain');
  });

  it('Digital Link: stem prefix, order of qualifiers, attributes, non-AI parameters', () => {
    expect(
      parseBarcode(
        'https://example.com/shop/01/09521234543213/21/S1?linkType=all&17=281200',
        OPTIONS,
      ),
    ).toMatchObject({
      kind: 'gs1',
      form: 'digital-link',
      elements: [{ ai: '01' }, { ai: '21', value: 'S1' }, { ai: '17', date: '2028-12-31' }],
    });
    expect(parseBarcode('https://a.b/01/09521234543213/21/S1/10/L1')).toMatchObject({
      kind: 'invalid',
      reason:
        'Digital Link: the key qualifiers of AI 01 (GTIN) must appear in the order 22, 10, 21 or 235; got 21, 10',
    });
    expect(parseBarcode('https://a.b/01/09521234543213/17/281231')).toMatchObject({
      kind: 'invalid',
      reason: expect.stringContaining(
        'AI 17 (USE BY OR EXPIRY) is not a key qualifier of AI 01 (GTIN)',
      ),
    });
    expect(parseBarcode('https://a.b/01/09521234543213?123=x')).toMatchObject({
      kind: 'invalid',
      reason: 'Digital Link: AI 123 in the query does not exist',
    });
    expect(parseBarcode('https://a.b/01/09521234543213?21=x')).toMatchObject({
      kind: 'invalid',
      reason: 'Digital Link: key qualifier AI 21 (SERIAL) must be in the path, not the query',
    });
    expect(parseBarcode('https://a.b/00/095212345678901235?02=09521234543213&37=5').kind).toBe(
      'gs1',
    );
    expect(parseBarcode('https://a.b/01/09521234543213/10/A%20B')).toMatchObject({
      kind: 'invalid',
      reason: "AI 10 (BATCH/LOT): character ' ' at position 2 is not allowed (CSET 82)",
    });
    expect(parseBarcode('https://a.b/01/09521234543213/10/A B')).toMatchObject({
      kind: 'invalid',
      reason: "Digital Link: character ' ' at position 35 is not allowed in a URI",
    });
    expect(parseBarcode(']Q1https://example.com/about').kind).toBe('plain');
    expect(parseBarcode(']C1https://a.b/01/09521234543213')).toMatchObject({
      kind: 'invalid',
      reason: expect.stringContaining('carries a URI'),
    });
  });
});

describe('AI table', () => {
  it('has every AI the brief names, with its title', () => {
    const want: Record<string, string> = {
      '00': 'SSCC',
      '01': 'GTIN',
      '02': 'CONTENT',
      '10': 'BATCH/LOT',
      '11': 'PROD DATE',
      '12': 'DUE DATE',
      '13': 'PACK DATE',
      '15': 'BEST BEFORE or BEST BY',
      '16': 'SELL BY',
      '17': 'USE BY OR EXPIRY',
      '20': 'VARIANT',
      '21': 'SERIAL',
      '22': 'CPV',
      '235': 'TPX',
      '240': 'ADDITIONAL ID',
      '241': 'CUST. PART No.',
      '242': 'MTO VARIANT',
      '250': 'SECONDARY SERIAL',
      '251': 'REF. TO SOURCE',
      '253': 'GDTI',
      '254': 'GLN EXTENSION COMPONENT',
      '255': 'GCN',
      '30': 'VAR. COUNT',
      '37': 'COUNT',
      '400': 'ORDER NUMBER',
      '401': 'GINC',
      '402': 'GSIN',
      '403': 'ROUTE',
      '410': 'SHIP TO LOC',
      '414': 'LOC No.',
      '417': 'PARTY',
      '420': 'SHIP TO POST',
      '421': 'SHIP TO POST',
      '422': 'ORIGIN',
      '423': 'COUNTRY - INITIAL PROCESS',
      '424': 'COUNTRY - PROCESS',
      '425': 'COUNTRY - DISASSEMBLY',
      '426': 'COUNTRY - FULL PROCESS',
      '7003': 'EXPIRY TIME',
      '7240': 'PROTOCOL',
      '8003': 'GRAI',
      '8004': 'GIAI',
      '8006': 'ITIP',
      '8008': 'PROD TIME',
      '8010': 'CPID',
      '8011': 'CPID SERIAL',
      '8020': 'REF No.',
      '8200': 'PRODUCT URL',
      '90': 'INTERNAL',
      '91': 'INTERNAL',
      '99': 'INTERNAL',
      '3100': 'NET WEIGHT (kg)',
      '3695': 'VOLUME (yd³), log',
    };
    for (const [ai, title] of Object.entries(want))
      expect(describeAi(ai)).toBe(`AI ${ai} (${title})`);
    for (const ai of ['410', '411', '412', '413', '414', '415', '416', '417'])
      expect(lookupAi(ai)?.components[0]?.linters).toContain('csum');
    expect(lookupAi('8004')?.components[0]?.linters).not.toContain('csum');
    expect(lookupAi('99')).toMatchObject({ maxLength: 90, predefinedLength: false });
  });

  it('AIs sharing their first two digits share their length, and only figure 7.8.5-2 prefixes skip the GS', () => {
    const lengthByPrefix = new Map<string, number>();
    for (const def of allAis()) {
      const prefix = def.ai.slice(0, 2);
      expect(lengthByPrefix.get(prefix) ?? def.ai.length).toBe(def.ai.length);
      lengthByPrefix.set(prefix, def.ai.length);
      const predefined = /^(0[0-4]|1[1-9]|20|3[1-6]|41)/.test(def.ai);
      expect(def.predefinedLength, def.ai).toBe(predefined);
      if (def.predefinedLength) expect(def.minLength, def.ai).toBe(def.maxLength);
    }
  });

  it('GRAI checks the check digit of its GTIN part; GIAI has none', () => {
    expect(parseBarcode(']C1800309521234543213A1').kind).toBe('gs1');
    expect(parseBarcode(']C1800309521234543214A1')).toMatchObject({
      kind: 'invalid',
      reason: 'AI 8003 (GRAI) check digit is 4, expected 3',
    });
    expect(parseBarcode(']C18004952123400001235').kind).toBe('gs1');
    const gln = `952123400001${(gs1CheckDigit('952123400001') + 1) % 10}`;
    expect(parseBarcode(`]C1414${gln}`)).toMatchObject({
      kind: 'invalid',
      reason: expect.stringContaining('AI 414 (LOC No.) check digit'),
    });
  });
});
