import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import type { Read } from '../../src/inputs/types.js';
import { mapRead, mappingContext } from '../../src/mapping/map-read.js';
import { Mapper } from '../../src/mapping/mapper.js';
import type { MapOutcome } from '../../src/mapping/outcome.js';

const GS = '\u001d';
const BASE = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
  - { key: GI-02, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }
  - { key: SOP-3, kind: startOfProcess, productModelKey: MOD-48V, attributes: { line: L3 } }
  - { key: GO-01, kind: goodsOut, productModelKey: PACK-A, clientKey: CL-7 }
inputs:
  - { id: gi, type: serial, path: /dev/null, dcp: GI-01 }
  - { id: sop, type: serial, path: /dev/null, dcp: SOP-3 }
  - { id: go, type: serial, path: /dev/null, dcp: GO-01 }
`;

const AT = new Date('2026-11-18T06:00:00Z');
const SERIALISED = `]d2010952123454321310B2611-03${GS}21C2611030001234`;
const SSCC = ']C100095212345678901235400PO-4711';
const CELL = ']d1C24A0K3B0712345';

function mapper(extra = ''): Mapper {
  return new Mapper(parseConfigText(BASE + extra, 'rules.yaml'));
}

function read(text: string, over: Partial<Read> = {}): Read {
  return { inputId: 'gi', raw: Buffer.from(text, 'utf8'), receivedAt: AT, ...over };
}

function scanOf(outcome: MapOutcome) {
  if (outcome.outcome !== 'scan')
    throw new Error(`expected a scan, got ${JSON.stringify(outcome)}`);
  return outcome.scan;
}

function reasonOf(outcome: MapOutcome): string {
  if (outcome.outcome !== 'rejected')
    throw new Error(`expected a rejection, got ${JSON.stringify(outcome)}`);
  return outcome.reason;
}

describe('mapping without rules (the default that existing inputs keep)', () => {
  it('sends the code exactly as read, AIM identifier and GS bytes included, with the DCP keys', () => {
    const scan = scanOf(
      mapRead(
        read(SERIALISED, { sourceTime: '2026-11-18T06:58:40+01:00' }),
        mappingContext(parseConfigText(BASE, 'x.yaml')),
      ),
    );
    expect(scan).toEqual({
      reference: SERIALISED,
      timeStamp: '2026-11-18T06:58:40',
      dcpKey: 'GI-01',
      productModelKey: 'PACK-A',
      supplierKey: 'SUP-1',
      parents: [],
      attributes: [],
    });
  });

  it('takes the DCP, parents and attributes the source supplied', () => {
    const scan = scanOf(
      mapper().map(read('PK-1', { dcpKey: 'GO-01', parents: ['P1'], attributes: { a: '1' } })),
    );
    expect(scan).toEqual({
      reference: 'PK-1',
      timeStamp: '2026-11-18T07:00:00',
      dcpKey: 'GO-01',
      productModelKey: 'PACK-A',
      clientKey: 'CL-7',
      parents: ['P1'],
      attributes: [{ key: 'a', value: '1' }],
    });
  });

  it.each([
    ['NOREAD', 'noRead'],
    ['', 'rejected'],
    [`]d20109521234543214${GS}10LOT`, 'rejected'],
    ['ABC\u0007', 'rejected'],
  ])('%j → %s', (text, outcome) => {
    expect(mapper().map(read(text)).outcome).toBe(outcome);
  });

  it('rejects bytes that are not UTF-8 and a DCP that is not configured', () => {
    expect(
      reasonOf(mapper().map({ inputId: 'gi', raw: Buffer.from([0xff, 0xfe]), receivedAt: AT })),
    ).toMatch(/not valid UTF-8/);
    expect(reasonOf(mapper().map(read('X', { dcpKey: 'NOPE' })))).toBe(
      'DCP "NOPE" is not configured (known: GI-01, GI-02, SOP-3, GO-01)',
    );
    expect(reasonOf(mapper().map(read('X', { inputId: 'ghost' })))).toMatch(
      /input "ghost" is not in the configuration/,
    );
  });
});

describe('matching and references', () => {
  const rules = `rules:
  - name: sscc
    match: { ais: ['00'] }
    reference: { ai: '00' }
  - name: serial
    match: { ais: ['01'] }
    reference: { ai: '21' }
  - name: batch
    match: { gs1: true }
    reference: { ai: '10' }
  - name: cell
    match: { gs1: false, regex: '^(?<cell>C[0-9A-Z]{14})$' }
    reference: { group: cell }
  - name: whole
    match: { regex: '^PK-' }
  - name: data
    match: { regex: '^TRAY-' }
    reference: { code: data }
`;
  it.each([
    ['GS1 AI 00 (SSCC)', SSCC, 'sscc', '095212345678901235'],
    ['GS1 AI 21 (serial)', SERIALISED, 'serial', 'C2611030001234'],
    ['AI 21 absent: the next rule', `]d2010952123454321310LOT7`, 'batch', 'LOT7'],
    ['named regex group', CELL, 'cell', 'C24A0K3B0712345'],
    ['whole code (default)', ']C0PK-0001', 'whole', ']C0PK-0001'],
    ['code without symbology identifier', ']C0TRAY-7', 'data', 'TRAY-7'],
    ['bracketed GS1 form', '(01)09521234543213(21)SN-9', 'serial', 'SN-9'],
    [
      'GS1 Digital Link',
      ']Q1https://id.example.com/01/09521234543213/21/PK%2F77',
      'serial',
      'PK/77',
    ],
  ])('%s', (_what, text, rule, reference) => {
    const outcome = mapper(rules).map(read(text));
    expect(outcome).toMatchObject({ outcome: 'scan', rule, scan: { reference } });
  });

  it('rejects a read no rule matched, naming the input and the rules tried', () => {
    const outcome = mapper(rules).map(read(']d1lowercase'));
    expect(reasonOf(outcome)).toBe(
      'no rule matched the read from input gi (rules tried: sscc, serial, batch, cell, whole, data)',
    );
    expect(outcome).toMatchObject({ tried: ['sscc', 'serial', 'batch', 'cell', 'whole', 'data'] });
  });

  it('rejects invalid GS1 before any rule, with the parser reason', () => {
    expect(reasonOf(mapper(rules).map(read(`]d20109521234543214${GS}10LOT`)))).toMatch(
      /^invalid GS1 data: .*check digit/,
    );
  });

  it('a GS1 code does not match gs1: false, a plain code does not match gs1: true', () => {
    const m = mapper(`rules:
  - { name: plain, match: { gs1: false } }
  - { name: gs1, match: { gs1: true }, reference: { code: data } }
`);
    expect(m.map(read(SSCC))).toMatchObject({ rule: 'gs1', tried: ['plain', 'gs1'] });
    expect(m.map(read(CELL))).toMatchObject({ rule: 'plain', scan: { reference: CELL } });
  });

  it('applies rules per input or per DCP; an input no rule applies to keeps the default', () => {
    const m = mapper(`rules:
  - { name: only-sop, dcps: [SOP-3], reference: { code: data } }
  - { name: only-go, inputs: [go], match: { regex: '^PK' }, reference: { code: data } }
`);
    expect(m.map(read(CELL, { inputId: 'sop' }))).toMatchObject({
      rule: 'only-sop',
      scan: { reference: 'C24A0K3B0712345', dcpKey: 'SOP-3' },
    });
    expect(reasonOf(m.map(read('XX', { inputId: 'go' })))).toBe(
      'no rule matched the read from input go (rules tried: only-go)',
    );
    expect(m.map(read(CELL))).toMatchObject({ rule: '(default)', scan: { reference: CELL } });
  });
});

describe('DCP, product, supplier and client', () => {
  const rules = `lookups:
  gtinToProduct:
    09521234543213: CELL-LFP
  stations: { Wareneingang-2: GI-02, GI-01: GI-01 }
rules:
  - name: serial
    match: { ais: ['01', '21'] }
    reference: { ai: '21' }
    productModelKey: { ai: '01', lookup: gtinToProduct }
    dcp: { sourceDcp: true, lookup: stations }
    supplierKey: { field: supplier }
  - name: static
    match: { regex: '^FIX' }
    productModelKey: PACK-B
    dcp: GO-01
    clientKey: { field: client }
  - name: from-field
    match: { regex: '^FLD' }
    productModelKey: { field: product, default: PACK-Z }
  - name: unknown-gtin
    match: { ais: ['01'] }
    reference: { ai: '10' }
    productModelKey: { ai: '01', lookup: gtinToProduct }
`;
  it.each([
    [
      'product from a GTIN lookup, DCP from a station lookup',
      read(SERIALISED, { dcpKey: 'Wareneingang-2' }),
      { productModelKey: 'CELL-LFP', dcpKey: 'GI-02', supplierKey: 'SUP-1' },
    ],
    ['no station named: the input DCP', read(SERIALISED), { dcpKey: 'GI-01' }],
    [
      'supplier from a field',
      read(SERIALISED, { attributes: { supplier: 'SUP-9' } }),
      { supplierKey: 'SUP-9', attributes: [] },
    ],
    [
      'fixed product and DCP, client from a field',
      read('FIX-1', { attributes: { client: 'CL-9' } }),
      { productModelKey: 'PACK-B', dcpKey: 'GO-01', clientKey: 'CL-9' },
    ],
    [
      'fixed DCP without client field: the DCP client',
      read('FIX-2'),
      { dcpKey: 'GO-01', clientKey: 'CL-7' },
    ],
    [
      'product from a field',
      read('FLD-1', { attributes: { product: 'PACK-Q' } }),
      { productModelKey: 'PACK-Q', attributes: [] },
    ],
    ['product field absent: its default', read('FLD-2'), { productModelKey: 'PACK-Z' }],
  ])('%s', (_what, r, expected) => {
    expect(scanOf(mapper(rules).map(r))).toMatchObject(expected);
  });

  it('a goods-in scan carries no clientKey and a goods-out scan no supplierKey', () => {
    expect(scanOf(mapper(rules).map(read('FIX-3')))).not.toHaveProperty('supplierKey');
    expect(scanOf(mapper(rules).map(read(SERIALISED)))).not.toHaveProperty('clientKey');
  });

  it('rejects a station the table does not know, naming the table', () => {
    expect(reasonOf(mapper(rules).map(read(SERIALISED, { dcpKey: 'GI-09' })))).toBe(
      'rule serial: DCP: the DCP the source named is "GI-09", which lookup table stations has no entry for',
    );
  });

  it('rejects a GTIN the product table does not know', () => {
    const gtin = '04012345000016';
    expect(reasonOf(mapper(rules).map(read(`]d201${gtin}10LOT`)))).toBe(
      `rule unknown-gtin: product model key: AI (01) is "${gtin}", which lookup table gtinToProduct has no entry for`,
    );
  });

  it('rejects a scan left without a product model key', () => {
    const m = new Mapper(parseConfigText(BASE.replace('productModelKey: MOD-48V, ', ''), 'x.yaml'));
    expect(reasonOf(m.map(read('X', { inputId: 'sop' })))).toMatch(
      /no product model key: DCP SOP-3 has none/,
    );
  });

  it('rejects unknown products when told the upstream list and rejectUnknown is on', () => {
    const m = mapper(`${rules}productCheck: { rejectUnknown: true }\n`);
    expect(m.map(read('FIX-1')).outcome).toBe('scan');
    m.setKnownProducts(new Set(['PACK-A']), new Date('2026-11-18T05:00:00Z'));
    expect(reasonOf(m.map(read('FIX-1')))).toBe(
      'product model key "PACK-B" is not in the upstream product list (fetched 2026-11-18T05:00:00.000Z); productCheck.rejectUnknown is on',
    );
    expect(m.productKeyUses()).toEqual([
      { key: 'CELL-LFP', where: ['lookups.gtinToProduct'] },
      { key: 'MOD-48V', where: ['dcps SOP-3'] },
      { key: 'PACK-A', where: ['dcps GI-01', 'dcps GI-02', 'dcps GO-01'] },
      { key: 'PACK-B', where: ['rule static'] },
      { key: 'PACK-Z', where: ['rule from-field (default)'] },
    ]);
  });
});

describe('attributes and parents', () => {
  const rules = `rules:
  - name: serial
    match: { ais: ['01', '21'] }
    reference: { ai: '21' }
    attributes:
      gtin: { ai: '01' }
      batch: { ai: '10' }
      expiry: { ai: '17', as: date }
      weight: { ai: '3103', as: decimal }
      shift: A
      plant: 0042
    parents: [{ field: parent }]
  - name: cell
    match: { regex: '^(?<cell>C(?<lot>[0-9A-Z]{7})\\d{7})$' }
    reference: { group: cell }
    attributes: { cellLot: { group: lot }, voltage: { field: v } }
    sourceAttributes: [ocv]
  - name: quiet
    match: { regex: '^Q' }
    sourceAttributes: false
`;
  it('takes GS1 AIs (as carried, as date, as decimal), fixed texts (digits as written), fields as parents', () => {
    const scan = scanOf(
      mapper(rules).map(
        read(`]d2010952123454321317281200310300123410C1${GS}21SN1`, {
          attributes: { parent: 'MOD-9', extra: 'x' },
        }),
      ),
    );
    expect(scan.attributes).toEqual([
      { key: 'extra', value: 'x' },
      { key: 'gtin', value: '09521234543213' },
      { key: 'batch', value: 'C1' },
      { key: 'expiry', value: '2028-12-31' },
      { key: 'weight', value: '1.234' },
      { key: 'shift', value: 'A' },
      { key: 'plant', value: '0042' },
    ]);
    expect(scan.parents).toEqual(['MOD-9']);
  });

  it('takes named groups and named fields, sends only the listed source fields, numbers as text', () => {
    const source = { ocv: 3.652, v: '4.1', other: 'no' } as unknown as Record<string, string>;
    const scan = scanOf(
      mapper(rules).map(
        read(CELL, { inputId: 'sop', attributes: source, parents: ['MOD-1', 'MOD-1', ''] }),
      ),
    );
    expect(scan.attributes).toEqual([
      { key: 'line', value: 'L3' },
      { key: 'ocv', value: '3.652' },
      { key: 'cellLot', value: '24A0K3B' },
      { key: 'voltage', value: '4.1' },
    ]);
    expect(scan.parents).toEqual(['MOD-1']);
  });

  it('sends no source fields with sourceAttributes: false; a later attribute replaces the DCP one of the same key', () => {
    expect(scanOf(mapper(rules).map(read('Q1', { attributes: { a: '1' } }))).attributes).toEqual(
      [],
    );
    const m = mapper(`rules:\n  - { name: all, attributes: { line: L4 } }\n`);
    expect(scanOf(m.map(read('X', { inputId: 'sop' }))).attributes).toEqual([
      { key: 'line', value: 'L4' },
    ]);
  });
});

describe('time stamps', () => {
  const rules = `rules:
  - { name: german, inputs: [gi], timeFormat: dd.MM.yyyy HH:mm:ss }
  - { name: unix, inputs: [sop], timeFormat: epochSeconds }
`;
  it.each([
    [
      'configured format, winter',
      'gi',
      '18.11.2026 06:58:12',
      '2026-11-18T06:58:12',
      '2026-11-18T05:58:12.000Z',
    ],
    [
      'configured format, summer',
      'gi',
      '01.07.2026 12:00:00',
      '2026-07-01T12:00:00',
      '2026-07-01T10:00:00.000Z',
    ],
    [
      'configured format, spring gap moved forward',
      'gi',
      '29.03.2026 02:30:00',
      '2026-03-29T03:30:00',
      '2026-03-29T01:30:00.000Z',
    ],
    [
      'configured format, repeated autumn hour: the first',
      'gi',
      '25.10.2026 02:30:00',
      '2026-10-25T02:30:00',
      '2026-10-25T00:30:00.000Z',
    ],
    [
      'ISO 8601 still accepted',
      'gi',
      '2026-11-18T06:58:12+01:00',
      '2026-11-18T06:58:12',
      '2026-11-18T05:58:12.000Z',
    ],
    [
      'epoch seconds across the autumn change',
      'sop',
      '1792891800',
      '2026-10-25T02:30:00',
      '2026-10-25T01:30:00.000Z',
    ],
  ])('%s', (_what, inputId, sourceTime, timeStamp, utc) => {
    const outcome = mapper(rules).map(
      read('X', { inputId, sourceTime, receivedAt: new Date(utc) }),
    );
    expect(outcome).toMatchObject({ outcome: 'scan', scan: { timeStamp } });
    expect(outcome.outcome === 'scan' && outcome.instant.toISOString()).toBe(utc);
  });

  it('rejects a time stamp that fits neither the format nor ISO 8601, naming both', () => {
    expect(reasonOf(mapper(rules).map(read('X', { sourceTime: '2026/11/18 06:58' })))).toBe(
      'time stamp "2026/11/18 06:58" fits neither the format "dd.MM.yyyy HH:mm:ss" of rule german nor ISO 8601',
    );
  });

  it('flags a time far from the receive time, or rejects it when told to', () => {
    const ahead = read('X', { sourceTime: '2026-11-18T09:00:00Z' });
    expect(mapper().map(ahead)).toMatchObject({
      outcome: 'scan',
      timeWarning: 'time stamp is 3 hours after the read was received',
    });
    const behind = read('X', { sourceTime: '2026-09-01T00:00:00Z' });
    expect(mapper().map(behind)).toMatchObject({
      outcome: 'scan',
      timeWarning: 'time stamp is 78 days before the read was received',
    });
    expect(
      reasonOf(
        mapper('timeCheck: { action: reject, maxAheadMs: 60000 }\n').map(
          read('X', { sourceTime: '2026-11-18T06:05:00Z' }),
        ),
      ),
    ).toBe('time stamp is 5 minutes after the read was received (timeCheck.action: reject)');
    expect(mapper().map(read('X', { sourceTime: '2026-11-18T06:10:00Z' }))).not.toHaveProperty(
      'timeWarning',
    );
  });
});

describe('ready Scans from a file of Scans', () => {
  const ready = {
    attributes: [{ key: 'v', value: '3.6' }],
    parents: ['PACK-9'],
    productModelKey: 'OTHER-PRODUCT',
    supplierKey: 'SUP-77',
    dcpKey: 'GI-02',
    timeStamp: '2026-10-25T02:30:00',
    reference: 'CELL-1',
  };

  it('are sent as written, in the contract field order, with the instant of their wall time', () => {
    const outcome = mapper().map(read(JSON.stringify(ready), { readyScan: ready }));
    const scan = scanOf(outcome);
    expect(Object.keys(scan)).toEqual([
      'reference',
      'timeStamp',
      'dcpKey',
      'productModelKey',
      'supplierKey',
      'parents',
      'attributes',
    ]);
    expect(scan).toEqual(ready);
    expect(outcome.outcome === 'scan' && outcome.instant.toISOString()).toBe(
      '2026-10-25T00:30:00.000Z',
    );
  });

  it('are rejected when their DCP is not configured, their time stamp is not the wire form, or they carry both party keys', () => {
    expect(
      reasonOf(mapper().map(read('x', { readyScan: { ...ready, dcpKey: 'NOPE' } }))),
    ).toContain('DCP "NOPE"');
    expect(
      reasonOf(
        mapper().map(read('x', { readyScan: { ...ready, timeStamp: '2026-10-25T02:30:00Z' } })),
      ),
    ).toContain('yyyy-MM-ddTHH:mm:ss');
    expect(
      reasonOf(
        mapper().map(
          read('x', { readyScan: { ...ready, supplierKey: 'SUP-1', clientKey: 'CLI-1' } }),
        ),
      ),
    ).toContain('both supplierKey (Goods In) and clientKey');
    expect(
      reasonOf(
        mapper().map(read('x', { readyScan: { ...ready, timeStamp: '2026-02-30T10:00:00' } })),
      ),
    ).toContain('2026-02-30');
  });
});
