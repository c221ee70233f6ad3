import type { DcpConfig } from '../config/schema.js';
import type { Read } from '../inputs/types.js';
import type { Scan } from '@scan-gateway/contract';
import { parseBarcode } from '../gs1/index.js';
import { parseSourceTime } from '../format/time.js';
import type { MapOutcome } from './outcome.js';

/**
 * A ready Scan from a file of Scans (contract §2.5) is sent as written: no rules, but its DCP
 * must be configured here, its time stamp must be a real wall time at the site, and it is either
 * Goods In (`supplierKey`) or Goods Out (`clientKey`), never both (contract §1, §2.5): the service
 * fails such a scan, so it is refused here, where the operator sees it at once.
 *
 * `dcps` are the configured DCPs by key; `timeZone` the site's IANA zone the time stamp is read in.
 */
export function mapReadyScan(
  given: Scan,
  read: Read,
  dcps: ReadonlyMap<string, DcpConfig>,
  timeZone: string,
): MapOutcome {
  const barcode = parseBarcode(given.reference, { referenceDate: read.receivedAt });
  if (!dcps.has(given.dcpKey)) {
    return {
      outcome: 'rejected',
      reason: `ready Scan names DCP ${quoteKey(given.dcpKey)}, which is not configured (known: ${knownDcps(dcps)})`,
      barcode,
    };
  }
  const instant = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/.test(given.timeStamp)
    ? parseSourceTime(given.timeStamp, timeZone)
    : undefined;
  if (!instant)
    return {
      outcome: 'rejected',
      reason: `ready Scan time stamp "${given.timeStamp}" is not yyyy-MM-ddTHH:mm:ss (contract §2.5)`,
      barcode,
    };
  if (given.supplierKey !== undefined && given.clientKey !== undefined) {
    return {
      outcome: 'rejected',
      reason:
        'ready Scan carries both supplierKey (Goods In) and clientKey (Goods Out); a scan is one or the other (contract §1)',
      barcode,
    };
  }
  // Fields in the contract's order, so the body sent is the same whichever order the file used.
  const scan: Scan = {
    reference: given.reference,
    timeStamp: given.timeStamp,
    dcpKey: given.dcpKey,
    productModelKey: given.productModelKey,
    ...(given.supplierKey !== undefined ? { supplierKey: given.supplierKey } : {}),
    ...(given.clientKey !== undefined ? { clientKey: given.clientKey } : {}),
    parents: given.parents,
    attributes: given.attributes,
  };
  return { outcome: 'scan', scan, instant, barcode };
}

/** A key taken from a read, quoted for a reason and cut at 64 characters (the read itself is kept whole). */
export function quoteKey(key: string): string {
  return JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key);
}

/** The configured DCP keys for a reason, at most 20 of them (a reason is stored with every refused read). */
export function knownDcps(dcps: ReadonlyMap<string, DcpConfig>): string {
  const keys = [...dcps.keys()];
  return keys.length <= 20
    ? keys.join(', ')
    : `${keys.slice(0, 20).join(', ')} and ${keys.length - 20} more`;
}
