/**
 * Shapes of a parsed barcode read. Source: GS1 General Specifications sections 3 (AIs), 5 (data
 * carriers and their symbology identifiers), 7.8 (element strings), GS1 Digital Link URI Syntax.
 */

/** One AI element string of a GS1 read. */
export interface Gs1Element {
  /** The Application Identifier, 2–4 digits, e.g. `01`, `3103`. */
  ai: string;
  /** GS1 data title, e.g. `GTIN`, `BATCH/LOT`. */
  title: string;
  /** The value exactly as carried (for a Digital Link: after percent-decoding). */
  value: string;
  /**
   * Resolved ISO 8601 date for date AIs (`2028-12-31`; day `00` resolved to the last day of the
   * month; YY resolved by the century rule of General Specifications 7.12). Date-time AIs give
   * `2028-12-31T14:30` (no zone: GS1 carries none), AI 7007 a range `2028-01-01/2028-01-05`.
   */
  date?: string;
  /**
   * Decimal value for measure and amount AIs (31nn–36nn, 390n–395n), as text with the decimal
   * point placed by the AI's last digit: AI 3103 `001234` → `1.234`. Precision is kept (`0.50`).
   */
  decimal?: string;
}

/** What an AIM symbology identifier (ISO/IEC 15424) at the start of a read says. */
export interface SymbologyInfo {
  /** The identifier as transmitted, e.g. `]d2`. */
  identifier: string;
  /** The symbology, e.g. `GS1 DataMatrix`. */
  name: string;
  /** Whether the identifier announces GS1 data (an element string, or a GTIN for EAN/UPC and ITF-14). */
  gs1: boolean;
}

/** How the GS1 data was written. */
export type Gs1Form = 'element-string' | 'bracketed' | 'digital-link';

/** The result of {@link parseBarcode}. */
export type BarcodeParse =
  | { kind: 'gs1'; symbology?: SymbologyInfo; form: Gs1Form; elements: Gs1Element[] }
  | {
      kind: 'invalid';
      symbology?: SymbologyInfo;
      form: Gs1Form;
      /** Names the AI and what is wrong, for a person at the line. */
      reason: string;
      /** The elements that were valid before the error was found. */
      elements: Gs1Element[];
    }
  | {
      kind: 'plain';
      symbology?: SymbologyInfo;
      /** The text without the symbology identifier. */
      data: string;
    };

/** Options of {@link parseBarcode}. */
export interface ParseOptions {
  /**
   * The moment the data is interpreted at: two-digit years are resolved around its year (General
   * Specifications 7.12). Default: now. Pass the read's receive time for reproducible results.
   */
  referenceDate?: Date;
  /**
   * Check requisite and invalid AI pairings (General Specifications 4.14), e.g. that AI 21 comes
   * with AI 01. Default true. GS1 evaluates these over all barcodes on an item; turn this off for
   * sources whose labels split one item's data over several barcodes read separately.
   */
  checkPairings?: boolean;
}
