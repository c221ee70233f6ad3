import type { Scan } from '@scan-gateway/contract';
import type { BarcodeParse } from '../gs1/index.js';
import type { ContainerChange } from './container-sessions.js';

/**
 * Stable codes of the mapping's refusals that a line acts on, for a scanner's reason-specific NAK
 * and the station screen: `noContainer` (a member read with no container open), `containerFull`
 * (the container it would join just filled up), `containerShort` (a new label or closing code while
 * the open container is short, `onIncomplete: refuse`), `containerCap` (too many open),
 * `requiredAttribute` (a `required: true` attribute has no value).
 */
export type RefusalCode =
  'noContainer' | 'containerFull' | 'containerShort' | 'containerCap' | 'requiredAttribute';

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
      /** Containers this read changed (opened, a member more, closed): committed with the read. */
      changes?: ContainerChange[];
    }
  | {
      outcome: 'rejected';
      reason: string;
      /** A stable code for the refusals a line acts on (see {@link RefusalCode}). */
      code?: RefusalCode;
      /** The words for the operator, when the refusal has its own (`MOD-1 has 3 of 12: finish it first`); `reason` starts with them. */
      message?: string;
      barcode?: BarcodeParse;
      /** Names of the rules tried. */
      tried?: string[];
      changes?: ContainerChange[];
    }
  | {
      outcome: 'noRead';
      /** Why a read that is not the scanner's no-read text is not sent (a container code). */
      reason?: string;
      barcode?: BarcodeParse;
      container?: { name: string; action: 'opened' | 'closed' | 'rescanned'; parent?: string };
      changes?: ContainerChange[];
    };
