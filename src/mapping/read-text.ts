import type { Read } from '../inputs/types.js';
import { stripSymbologyIdentifier, type BarcodeParse, type Gs1Element } from '../gs1/index.js';
import type { MapOutcome } from './outcome.js';
import type { ReadView } from './value-source.js';

/**
 * The first step of mapping a read: its bytes as text, or why it is no barcode at all (not UTF-8,
 * empty, the scanner's no-read text, a control byte no barcode carries). Then the view the rules
 * read: text, data without the symbology identifier, and the GS1 elements by AI.
 */

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** C0 control characters other than GS (0x1D, the FNC1 separator), RS (0x1E) and EOT (0x04) of ISO/IEC 15434. */
// eslint-disable-next-line no-control-regex -- the control bytes no barcode carries are what this finds
const FORBIDDEN_CONTROL = /[\u0000-\u0003\u0005-\u001c\u001f\u007f]/;

/**
 * The read's text, or the outcome that ends its mapping here: a rejection with the reason, or a
 * no-read when the text is one of the input's `noReadStrings` (compared trimmed).
 */
export function readText(
  read: Read,
  noReadStrings: readonly string[],
): { text: string } | { outcome: MapOutcome } {
  let text: string;
  try {
    text = utf8.decode(read.raw);
  } catch {
    return {
      outcome: {
        outcome: 'rejected',
        reason: `the read is not valid UTF-8 text (${read.raw.length} bytes, kept as raw bytes)`,
      },
    };
  }
  if (text.trim() === '') return { outcome: { outcome: 'rejected', reason: 'the read is empty' } };
  if (noReadStrings.includes(text.trim())) return { outcome: { outcome: 'noRead' } };
  const control = FORBIDDEN_CONTROL.exec(text);
  if (control) {
    const code = control[0].charCodeAt(0).toString(16).padStart(2, '0');
    return {
      outcome: {
        outcome: 'rejected',
        reason: `the read holds the control byte 0x${code} at position ${control.index}, which no barcode carries`,
      },
    };
  }
  return { text };
}

/** What the rules read of one read: the text, its data, its parse and its GS1 elements (first of each AI). */
export function readView(read: Read, text: string, barcode: BarcodeParse): ReadView {
  const elements = new Map<string, Gs1Element>();
  if (barcode.kind === 'gs1')
    for (const e of barcode.elements) if (!elements.has(e.ai)) elements.set(e.ai, e);
  const data = barcode.kind === 'plain' ? barcode.data : stripSymbologyIdentifier(text).data;
  return { read, text, data, barcode, elements };
}
