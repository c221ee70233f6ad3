import type { Scan } from '@scan-gateway/contract';

/*
 * A shape more than one room holds: the inputs produce it, the mapping maps it, the buffer stores
 * it and gives it back for replay. It lives on a floor of its own, below all of them, so that no
 * room restates it to keep to the direction of imports (docs/rooms.json).
 */

/** One barcode read, exactly as a source delivered it. */
export interface Read {
  /** `id` of the input in the configuration. */
  inputId: string;
  /** The bytes as received (after framing, terminator removed). Kept so a rejection can show them. */
  raw: Buffer;
  /** When the gateway received the read (its own clock). */
  receivedAt: Date;
  /** A time stamp the source supplied (CSV column, JSON field), unparsed. */
  sourceTime?: string;
  /** A DCP key the source supplied (topic level, column), overriding the input's DCP. */
  dcpKey?: string;
  /** Parent references the source supplied. */
  parents?: string[];
  /** Attributes the source supplied; values as text. */
  attributes?: Record<string, string>;
  /** Where it came from, for people: file and line, topic, port. */
  origin?: Record<string, string | number>;
  /**
   * A ready Scan in the upstream format (contract §2.5), already validated, from a `json` file of
   * Scans. The mapping sends it as it is (after checking its DCP and time stamp) instead of
   * applying rules; `raw` holds its JSON and `origin.format` is `scan`.
   */
  readyScan?: Scan;
}
