import type { Scan } from '@scan-gateway/contract';
import type { BarcodeParse } from '../gs1/index.js';
import type { VerdictReason } from '../config/verdict-reasons.js';

/**
 * What one read becomes: a Scan (contract §2.5) with the UTC instant of its time stamp, a
 * rejection with a reason a person can act on, or a no-read (the scanner's no-read text, or a
 * control code such as a container's closing code: counted, never sent).
 *
 * `rule`, `tried` and `container` explain the outcome for `scan-gateway try` and the health page.
 */
export type MapOutcome =
  | {
      outcome: 'scan';
      scan: Scan;
      /** The UTC instant of `scan.timeStamp`, kept beside the zone-less wire form. */
      instant: Date;
      /** Set when the read's time is implausible (far future or past) but still used. */
      timeWarning?: string;
      /** Attributes of the rule that were not sent, each with why (its source had no value): stored with the read. */
      notes?: string[];
      /** What the GS1 parser found, for `try` and the health page. */
      barcode: BarcodeParse;
      /** Name of the rule that mapped the read (`(default)` for an input without rules). */
      rule?: string;
      /** Names of the rules tried before and including `rule`. */
      tried?: string[];
      /** The container this read opened (it is also its own scan) or took its parent from. */
      container?: { name: string; action: 'opened' | 'member'; parent: string; closed?: string };
    }
  | {
      outcome: 'rejected';
      reason: string;
      /** Why, as a code for the scanner's NAK; when absent the intake derives it from `reason`. */
      code?: VerdictReason;
      barcode?: BarcodeParse;
      /** Names of the rules tried. */
      tried?: string[];
    }
  | {
      outcome: 'noRead';
      /** Why a read that is not the scanner's no-read text is not sent (a container code). */
      reason?: string;
      barcode?: BarcodeParse;
      container?: { name: string; action: 'opened' | 'closed'; parent?: string };
    };
