import type { VerdictReason } from '../config/verdict-reasons.js';
import type { ItemOutcome } from '../inputs/types.js';
import type { MapOutcome } from '../mapping/outcome.js';

/**
 * The verdict of one read, as the source may tell the scanner: `ack` only for a read that became
 * a scan, and for a container's opening or closing code that did its work (the operator scanned
 * the right label); `nak` for everything else, with why as a code of VERDICT_REASONS
 * (src/config/verdict-reasons.ts). The mapping may name the code itself (`MapOutcome.code`);
 * otherwise it is read from the reason the mapper wrote (src/mapping/mapper.ts), the words the
 * station screen reads too (src/health/station-words.ts).
 */

/** The code of a refusal by the mapping, from its reason; `refused` when no pattern fits. */
export function refusalCode(reason: string): VerdictReason {
  if (/^the read is empty/.test(reason)) return 'empty';
  if (/not valid UTF-8|control byte/.test(reason)) return 'notText';
  if (/check digit/i.test(reason)) return 'checkDigit';
  if (/^invalid GS1 data/.test(reason)) return 'invalidGs1';
  if (/needs an open container/.test(reason)) return 'noContainer';
  if (/no rule matched/.test(reason)) return 'noRule';
  if (/DCP .*not configured|^input ".*" is not in the configuration/.test(reason))
    return 'unknownDcp';
  if (/container/.test(reason)) return 'container';
  if (/product model key|product list/.test(reason)) return 'unknownProduct';
  if (/time stamp|timeCheck/.test(reason)) return 'time';
  return 'refused';
}

/** The verdict of a read the mapping judged (`result`), before the duplicate window. */
export function mappedVerdict(
  result: MapOutcome,
): Pick<ItemOutcome, 'verdict' | 'code' | 'reference'> {
  switch (result.outcome) {
    case 'scan':
      return { verdict: 'ack', reference: result.scan.reference };
    case 'rejected':
      return { verdict: 'nak', code: result.code ?? refusalCode(result.reason) };
    case 'noRead': {
      const c = result.container;
      // A container's label that opened it (sendParent: false), or its closing code that closed one.
      if (c?.parent !== undefined) return { verdict: 'ack', reference: c.parent };
      return { verdict: 'nak', code: c ? 'noContainer' : 'noRead' };
    }
  }
}

/** The verdict of an input-level rejection (nothing could be framed or parsed). */
export function rejectionVerdict(
  code: VerdictReason | undefined,
): Pick<ItemOutcome, 'verdict' | 'code'> {
  return { verdict: 'nak', code: code ?? 'refused' };
}
