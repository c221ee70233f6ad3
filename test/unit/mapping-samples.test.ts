import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type LoadedConfig } from '../../src/config/load.js';
import type { BuiltInInputConfig } from '../../src/inputs/registry.js';
import { parseCsvFile } from '../../src/inputs/files/parse-csv.js';
import { messageToItem } from '../../src/inputs/mqtt/mqtt-payload.js';
import { Framer } from '../../src/inputs/stream/framer.js';
import type { IntakeItem } from '../../src/inputs/types.js';
import { DuplicateWindow } from '../../src/mapping/duplicate-window.js';
import { Mapper } from '../../src/mapping/mapper.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

/**
 * The samples of samples/, read by the real input parsers, mapped through
 * config/example.yaml, compared field by field with the Scans a reader of the samples expects.
 */

const SAMPLES = join(PACKAGE_ROOT, 'samples');
const GS = '\u001d';
const SSCC = '095212345678901235';
/** The canonical GS1 references the example's GS1 rules give (`{ gs1: canonical }`). */
const PALLET = `https://id.gs1.org/00/${SSCC}`;
const pack = (serial: string) => `https://id.gs1.org/01/09521234543213/21/${serial}`;

let loaded: LoadedConfig;
beforeAll(() => {
  loaded = loadConfig(join(PACKAGE_ROOT, 'config/example.yaml'), {
    baseDir: PACKAGE_ROOT,
    env: {},
    skipSecret: true,
  });
});

function inputOf<T extends BuiltInInputConfig['type']>(
  id: string,
  type: T,
): Extract<BuiltInInputConfig, { type: T }> {
  const input = loaded.config.inputs.find((i) => i.id === id);
  if (!input || input.type !== type)
    throw new Error(`config/example.yaml has no ${type} input ${id}`);
  return input as Extract<BuiltInInputConfig, { type: T }>;
}

/** What the intake does with each item: map, then the DCP's duplicate window. */
function run(items: IntakeItem[]): unknown[] {
  const mapper = new Mapper(loaded.config);
  const window = new DuplicateWindow();
  return items.map((item) => {
    if (item.kind === 'rejection') return { outcome: 'rejected', reason: item.rejection.reason };
    const o = mapper.map(item.read);
    if (o.outcome === 'rejected') return { outcome: 'rejected', reason: o.reason };
    if (o.outcome === 'noRead') return { outcome: 'noRead' };
    const duplicate = window.check(
      o.scan.dcpKey,
      o.scan.reference,
      o.instant.getTime(),
      mapper.duplicateWindowMs(o.scan.dcpKey),
    );
    return duplicate
      ? { outcome: 'duplicate', reference: o.scan.reference }
      : { outcome: 'scan', scan: o.scan, ...(o.timeWarning ? { timeWarning: o.timeWarning } : {}) };
  });
}

describe('samples through config/example.yaml', () => {
  it('goods-in CSV export: station column (desk) → DCP lookup, supplier column → supplierKey, the pallet SSCC as parent', async () => {
    const input = inputOf('gi-inbox', 'files');
    const dir = mkdtempSync(join(tmpdir(), 'sg-samples-'));
    const file = join(dir, 'goods-in-export.csv');
    const original = readFileSync(join(SAMPLES, 'goods-in-export.csv'), 'utf8');
    // The same export with the GI-02 row's check digit corrected, to show that row's station lookup.
    const fixed = original.replace(
      `]d20109521234543214${GS}10LOT`,
      `]d20109521234543213${GS}10LOT`,
    );
    expect(fixed).not.toBe(original);
    const receivedAt = new Date('2026-11-18T06:00:00Z');
    const parse = async (text: string) => {
      writeFileSync(file, text);
      return parseCsvFile(
        file,
        { inputId: input.id, fileName: 'goods-in-export.csv', receivedAt },
        input,
      );
    };
    const supplier = { dcpKey: 'GI-01', productModelKey: 'PACK-A', supplierKey: 'SUP-0042' };
    const expected = [
      {
        outcome: 'scan',
        scan: {
          reference: PALLET,
          timeStamp: '2026-11-18T06:58:12',
          ...supplier,
          parents: [],
          attributes: [
            { key: 'deliveryNote', value: 'DN-88121' },
            { key: 'purchaseOrder', value: 'PO-4711' },
          ],
        },
      },
      {
        outcome: 'scan',
        scan: {
          reference: pack('C2611030001234'),
          timeStamp: '2026-11-18T06:58:40',
          ...supplier,
          parents: [PALLET],
          attributes: [
            { key: 'deliveryNote', value: 'DN-88121' },
            { key: 'gtin', value: '09521234543213' },
            { key: 'batch', value: 'B2611-03' },
          ],
        },
      },
      {
        outcome: 'scan',
        scan: {
          reference: pack('C2611030001235'),
          timeStamp: '2026-11-18T06:58:41',
          ...supplier,
          parents: [PALLET],
          attributes: [
            { key: 'deliveryNote', value: 'DN-88121' },
            { key: 'gtin', value: '09521234543213' },
            { key: 'batch', value: 'B2611-03' },
          ],
        },
      },
      {
        outcome: 'scan',
        scan: {
          reference: 'C24A0K3B0712345',
          timeStamp: '2026-11-18T06:59:03',
          ...supplier,
          parents: [PALLET],
          attributes: [
            { key: 'deliveryNote', value: 'DN-88121, partial' },
            { key: 'cellLot', value: '24A0K3B' },
          ],
        },
      },
    ];
    const asIs = run(await parse(original));
    expect(asIs.slice(0, 4)).toEqual(expected);
    expect(asIs[4]).toEqual({
      outcome: 'rejected',
      reason: expect.stringMatching(/^invalid GS1 data: .*check digit/) as unknown,
    });
    expect(asIs).toHaveLength(5);

    const corrected = run(await parse(fixed));
    expect(corrected.slice(0, 4)).toEqual(expected);
    expect(corrected[4]).toEqual({
      outcome: 'scan',
      // Desk GI-02 reports as DCP GI-01 (the lookup), and has its own pallet session (per station,
      // the desk the row names): no parent from desk GI-01's pallet.
      scan: {
        reference: 'https://id.gs1.org/01/09521234543213/10/LOT',
        timeStamp: '2026-11-18T06:59:30',
        dcpKey: 'GI-01',
        productModelKey: 'PACK-A',
        supplierKey: 'SUP-0042',
        parents: [],
        attributes: [
          { key: 'deliveryNote', value: 'DN-88121' },
          { key: 'gtin', value: '09521234543213' },
        ],
      },
    });
  });

  it('serial capture at goods in: serials as references, no-reads, the double read, bad reads rejected', () => {
    const input = inputOf('gi-scanner', 'serial');
    const framer = new Framer({
      terminator: Buffer.from(input.terminator, 'latin1'),
      maxLength: input.maxReadLength,
    });
    const start = Date.parse('2026-11-18T07:10:00Z');
    const frames = framer.push(readFileSync(join(SAMPLES, 'serial-capture-line3.bin')));
    const items: IntakeItem[] = frames.map((f, i) => {
      if (f.kind !== 'frame') throw new Error(`unexpected framer event ${f.kind}`);
      return {
        kind: 'read',
        read: { inputId: input.id, raw: f.bytes, receivedAt: new Date(start + i * 200) },
      };
    });
    // 200 ms apart from 08:10:00 Berlin time: five reads a second.
    const at = (i: number) => `2026-11-18T08:10:0${Math.floor(i / 5)}`;
    const cell = (serial: string, i: number, parents: string[] = []) => ({
      outcome: 'scan',
      scan: {
        reference: pack(serial),
        timeStamp: at(i),
        dcpKey: 'GI-01',
        productModelKey: 'PACK-A',
        supplierKey: 'SUP-0042',
        parents,
        attributes: [
          { key: 'gtin', value: '09521234543213' },
          { key: 'batch', value: 'B2611-03' },
        ],
      },
    });
    expect(run(items)).toEqual([
      cell('C2611030001234', 0),
      cell('C2611030001235', 1),
      { outcome: 'noRead' },
      cell('C2611030001236', 3),
      { outcome: 'duplicate', reference: pack('C2611030001236') },
      {
        outcome: 'scan',
        scan: {
          reference: PALLET,
          timeStamp: at(5),
          dcpKey: 'GI-01',
          productModelKey: 'PACK-A',
          supplierKey: 'SUP-0042',
          parents: [],
          attributes: [{ key: 'purchaseOrder', value: 'PO-4711' }],
        },
      },
      cell('C2611030001237', 6, [PALLET]),
      {
        outcome: 'rejected',
        reason: 'the read is not valid UTF-8 text (12 bytes, kept as raw bytes)',
      },
      {
        outcome: 'rejected',
        reason: expect.stringMatching(/^invalid GS1 data: .*check digit/) as unknown,
      },
      {
        outcome: 'scan',
        scan: {
          reference: 'C24A0K3B0712345',
          timeStamp: at(9),
          dcpKey: 'GI-01',
          productModelKey: 'PACK-A',
          supplierKey: 'SUP-0042',
          parents: [PALLET],
          attributes: [{ key: 'cellLot', value: '24A0K3B' }],
        },
      },
      { outcome: 'noRead' },
    ]);
  });

  it('MQTT camera payloads: module serials with the product from AI 240, cells with their module as parent and numbers as text', () => {
    const input = inputOf('line3-cameras', 'mqtt');
    const lines = readFileSync(join(SAMPLES, 'mqtt-reader-payloads.ndjson'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '');
    const items = lines.map((line) => {
      const ts = Date.parse((JSON.parse(line) as { ts: string }).ts);
      return messageToItem(
        input,
        'plant1/line3/cameras/cam-07/reads',
        Buffer.from(line),
        new Date(ts + 300),
      );
    });
    const module = (serial: string, timeStamp: string) => ({
      outcome: 'scan',
      scan: {
        reference: serial,
        timeStamp,
        dcpKey: 'EOL-3',
        productModelKey: 'MOD-48V',
        parents: [],
        attributes: [
          { key: 'line', value: 'L3' },
          { key: 'gtin', value: '09521234543213' },
          { key: 'moduleType', value: 'BM-48V-16S' },
        ],
      },
    });
    expect(run(items)).toEqual([
      module('MOD-000042', '2026-11-18T08:01:02'),
      module('MOD-000043', '2026-11-18T08:01:09'),
      { outcome: 'noRead' },
      {
        outcome: 'scan',
        scan: {
          reference: 'C24A0K3B0712345',
          timeStamp: '2026-11-18T08:02:00',
          dcpKey: 'SOP-3',
          productModelKey: 'MOD-48V',
          parents: ['MOD-000043'],
          attributes: [
            { key: 'line', value: 'L3' },
            { key: 'cellLot', value: '24A0K3B' },
          ],
        },
      },
      {
        outcome: 'scan',
        scan: {
          reference: 'C24A0K3B0712346',
          timeStamp: '2026-11-18T08:02:01',
          dcpKey: 'SOP-3',
          productModelKey: 'MOD-48V',
          parents: ['MOD-000043'],
          attributes: [
            { key: 'line', value: 'L3' },
            { key: 'cellVoltage', value: '3.652' },
            { key: 'ocvTest', value: 'pass' },
            { key: 'cellLot', value: '24A0K3B' },
          ],
        },
      },
    ]);
  });
});
