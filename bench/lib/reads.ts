import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseDocument, visit } from 'yaml';
import type { IntakeRecord } from '../../src/buffer/store.js';
import { parseConfigText } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/schema.js';
import type { IntakeItem, Read } from '../../src/inputs/types.js';
import { gs1CheckDigit } from '../../src/gs1/index.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
// The input kinds, before a configuration is read.
import '../../src/inputs/registry.js';

/**
 * Realistic reads for the benchmarks, mapped by the rules of config/example.yaml (the realistic
 * site: lookups, rules, container sessions). What a goods-in scanner sends: serialised GS1 items
 * (GTIN + serial + lot, GS separators, symbology identifiers), plain cell codes, now and then a
 * pallet's SSCC (which opens a container session: the items after it get the pallet as parent),
 * a few no-reads and double reads (duplicates). What the line-3 PLC bridge publishes: cell codes.
 */

/** The example configuration's file. */
export const EXAMPLE_CONFIG = join(PACKAGE_ROOT, 'config/example.yaml');

/** Changes to make to the example: values to set, by key path (`['inputs', 3, 'url']`), or undefined to delete. */
export type ConfigEdits = Array<[path: (string | number)[], value: unknown]>;

/**
 * The text of config/example.yaml with `edits` applied. Numbers written with leading zeros (GTINs
 * in lookup tables) are kept as written, as the real loader reads them.
 */
export function adaptedExampleText(edits: ConfigEdits): string {
  const doc = parseDocument(readFileSync(EXAMPLE_CONFIG, 'utf8'));
  visit(doc, {
    Scalar(_key, node) {
      if (
        typeof node.value === 'number' &&
        typeof node.source === 'string' &&
        /^[+-]?0\d/.test(node.source)
      )
        node.value = node.source;
    },
  });
  for (const [path, value] of edits) {
    if (value === undefined) doc.deleteIn(path);
    else doc.setIn(path, value);
  }
  return doc.toString();
}

/** The example's inputs, in order (to address them by index in edits), as plain objects. */
export function exampleInputs(): ({ id: string; type: string } & Record<string, unknown>)[] {
  const config = parseDocument(readFileSync(EXAMPLE_CONFIG, 'utf8')).toJS() as {
    inputs?: ({ id: string; type: string } & Record<string, unknown>)[];
  };
  return config.inputs ?? [];
}

/**
 * config/example.yaml, with `edits`, through the real loader and schema. Secrets and files the
 * inputs name are not read: only the mapping (and the one adapter a benchmark starts) uses this.
 */
export function benchConfig(edits: ConfigEdits = []): GatewayConfig {
  return parseConfigText(
    adaptedExampleText(edits),
    'config/example.yaml (adapted for the benchmark)',
  );
}

/** The goods-in serial scanner of the example: reads of benchmark 1 come from it. */
export const GOODS_IN_INPUT = 'gi-scanner';
/** The line-3 PLC bridge of the example (MQTT, text payloads, DCP from the topic level). */
export const PLC_INPUT = 'plc-bridge';
/** A topic of the PLC bridge: station line3-sop, which the lookup `plcStations` makes DCP SOP-3. */
export const PLC_TOPIC = 'plant1/line3-sop/scan';

/** The GTIN that `lookups.gtinToProduct` of the example knows. */
const GTIN = '09521234543213';
const GS = '\x1d';

function sscc(n: number): string {
  const body = `0952123${String(n).padStart(10, '0')}`;
  return body + String(gs1CheckDigit(body));
}

function serial(k: number): string {
  return (1_000_000_000 + k).toString(36).toUpperCase();
}

/** The reference of backlog scan number `n` ({@link backlogRecord}), to look it up. */
export const backlogReference = (n: number): string => serial(n);

/**
 * The text of goods-in read number `n`, unique per `n` except that 1 in 100 is a no-read and 1 in
 * 100 repeats the read before (a double read: a duplicate at the DCP); 1 in 500 is a pallet SSCC.
 */
export function barcodeText(n: number): string {
  if (n % 500 === 0) return `]C100${sscc(n / 500)}`;
  if (n % 100 === 37) return 'NOREAD';
  const k = n % 100 === 73 ? n - 1 : n;
  const lot = `L${2400 + (k % 97)}`;
  switch (k % 3) {
    case 0:
      return `]C101${GTIN}21${serial(k)}${GS}10${lot}`;
    case 1:
      return `]d201${GTIN}21${serial(k)}${GS}10${lot}${GS}17271231`;
    default:
      return `C${lot.padEnd(7, 'X')}${String(k % 10_000_000).padStart(7, '0')}`;
  }
}

/** A cell code as the PLC bridge publishes it (rule plc-cells: C + 14 characters). */
export function plcText(n: number): string {
  return `C${serial(n).padStart(14, '0')}`;
}

/** Goods-in read number `n`, as the serial adapter hands it over. */
export function benchRead(n: number, receivedAt: Date): Read {
  return {
    inputId: GOODS_IN_INPUT,
    raw: Buffer.from(barcodeText(n), 'latin1'),
    receivedAt,
    origin: { port: '/dev/ttyUSB0' },
  };
}

/** Goods-in read number `n` as the item an adapter submits. */
export function benchItem(n: number, receivedAt: Date): IntakeItem {
  return { kind: 'read', read: benchRead(n, receivedAt) };
}

/**
 * A pending scan as intake commits it, for writing a backlog quickly: the Scan JSON has the shape
 * the example's `gs1-serialised` rule gives a goods-in item inside a pallet session (about 280
 * bytes; one in five carries an expiry attribute too, so batches meet scans of different sizes).
 */
export function backlogRecord(n: number, at: Date, wireTime: string): IntakeRecord {
  const reference = serial(n);
  const attributes = [
    { key: 'gtin', value: GTIN },
    { key: 'batch', value: `L${2400 + (n % 97)}` },
    ...(n % 5 === 0 ? [{ key: 'expiry', value: '2027-12-31' }] : []),
  ];
  const scan = {
    reference,
    timeStamp: wireTime,
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    supplierKey: 'SUP-0042',
    parents: [sscc(Math.floor(n / 500))],
    attributes,
  };
  return {
    inputId: GOODS_IN_INPUT,
    receivedAt: at,
    raw: Buffer.from(`]C101${GTIN}21${reference}${GS}10L${2400 + (n % 97)}`, 'latin1'),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: at, body: JSON.stringify(scan) },
  };
}
