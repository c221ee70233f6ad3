import type { DcpConfig, GatewayConfig, InputConfig } from '../config/schema.js';
import type { Read } from '../inputs/types.js';
import type { Scan } from '../upstream/contract.js';
import { parseBarcode, type BarcodeParse } from './gs1/index.js';
import { formatWireTime, parseSourceTime } from './time.js';

/** What one read becomes. Pure: the same read and configuration always give the same outcome. */
export type MapOutcome =
  | {
      outcome: 'scan';
      scan: Scan;
      /** The UTC instant of `scan.timeStamp`, kept beside the zone-less wire form. */
      instant: Date;
      /** Set when the read's time is implausible (far future or past) but still used. */
      timeWarning?: string;
      /** What the GS1 parser found, for `try` and the health page. */
      barcode: BarcodeParse;
    }
  | { outcome: 'rejected'; reason: string; barcode?: BarcodeParse }
  | { outcome: 'noRead' };

/** The parts of the configuration the mapping needs, indexed once. */
export interface MappingContext {
  timeZone: string;
  dcps: ReadonlyMap<string, DcpConfig>;
  inputs: ReadonlyMap<string, InputConfig>;
}

export function mappingContext(config: GatewayConfig): MappingContext {
  return {
    timeZone: config.site.timezone,
    dcps: new Map(config.dcps.map((d) => [d.key, d])),
    inputs: new Map(config.inputs.map((i) => [i.id, i])),
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** C0 control characters other than GS (0x1D, the FNC1 separator), RS (0x1E) and EOT (0x04) of ISO/IEC 15434. */
// eslint-disable-next-line no-control-regex
const FORBIDDEN_CONTROL = /[\u0000-\u0003\u0005-\u001c\u001f\u007f]/;

const FAR_MS = 366 * 24 * 3600_000;

/**
 * Maps a read into a Scan (contract §2.5), a no-read, or a rejection with a reason a person can act on.
 *
 * First version of the rules: the reference is the barcode text exactly as read (AIM symbology
 * identifier and GS bytes included); the DCP is the one the source named, else the input's; the
 * product, supplier (Goods In) and client (Goods Out) keys come from the DCP. A code that announces
 * itself as GS1 (symbology identifier, bracketed form or Digital Link) must be valid GS1.
 */
export function mapRead(read: Read, ctx: MappingContext): MapOutcome {
  const input = ctx.inputs.get(read.inputId);
  if (!input) return { outcome: 'rejected', reason: `input "${read.inputId}" is not in the configuration` };

  let text: string;
  try {
    text = utf8.decode(read.raw);
  } catch {
    return { outcome: 'rejected', reason: `the read is not valid UTF-8 text (${read.raw.length} bytes, kept as raw bytes)` };
  }
  if (text.trim() === '') return { outcome: 'rejected', reason: 'the read is empty' };
  if (input.noReadStrings.includes(text.trim())) return { outcome: 'noRead' };
  const control = FORBIDDEN_CONTROL.exec(text);
  if (control) {
    const code = control[0].charCodeAt(0).toString(16).padStart(2, '0');
    return { outcome: 'rejected', reason: `the read holds the control byte 0x${code} at position ${control.index}, which no barcode carries` };
  }

  // The read's own time resolves two-digit years, so a replayed read maps as it did the first time.
  const barcode = parseBarcode(text, { referenceDate: read.receivedAt });
  if (barcode.kind === 'invalid') return { outcome: 'rejected', reason: `invalid GS1 data: ${barcode.reason}`, barcode };

  const dcpKey = read.dcpKey ?? input.dcp;
  const dcp = ctx.dcps.get(dcpKey);
  if (!dcp) return { outcome: 'rejected', reason: `DCP "${dcpKey}" is not configured (known: ${[...ctx.dcps.keys()].join(', ')})`, barcode };

  let instant = read.receivedAt;
  if (read.sourceTime !== undefined && read.sourceTime.trim() !== '') {
    const parsed = parseSourceTime(read.sourceTime, ctx.timeZone);
    if (!parsed) {
      return {
        outcome: 'rejected',
        reason: `time stamp "${read.sourceTime}" is not ISO 8601 (expected e.g. 2026-11-18T06:58:12+01:00)`,
        barcode,
      };
    }
    instant = parsed;
  }
  const drift = instant.getTime() - read.receivedAt.getTime();
  const timeWarning =
    drift > FAR_MS ? 'time stamp is more than a year after it was received' : drift < -10 * FAR_MS ? 'time stamp is more than ten years old' : undefined;

  const scan: Scan = {
    reference: text,
    timeStamp: formatWireTime(instant, ctx.timeZone),
    dcpKey: dcp.key,
    productModelKey: dcp.productModelKey,
    ...(dcp.kind === 'goodsIn' && dcp.supplierKey ? { supplierKey: dcp.supplierKey } : {}),
    ...(dcp.kind === 'goodsOut' && dcp.clientKey ? { clientKey: dcp.clientKey } : {}),
    parents: read.parents ?? [],
    attributes: Object.entries(read.attributes ?? {}).map(([key, value]) => ({ key, value })),
  };
  return { outcome: 'scan', scan, instant, barcode, ...(timeWarning ? { timeWarning } : {}) };
}
