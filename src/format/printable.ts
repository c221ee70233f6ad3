/**
 * Reads and bytes as text a person can read on a terminal, in a log line or on the health page:
 * no I/O, no imports. Shared by the CLI (`failures`, `try`), the buffer's reports and the status.
 */

/** Names of the C0 control bytes 0x00–0x1f, as `<GS>`, `<CR>` … in printed reads. */
export const C0_NAMES = [
  'NUL',
  'SOH',
  'STX',
  'ETX',
  'EOT',
  'ENQ',
  'ACK',
  'BEL',
  'BS',
  'HT',
  'LF',
  'VT',
  'FF',
  'CR',
  'SO',
  'SI',
  'DLE',
  'DC1',
  'DC2',
  'DC3',
  'DC4',
  'NAK',
  'SYN',
  'ETB',
  'CAN',
  'EM',
  'SUB',
  'ESC',
  'FS',
  'GS',
  'RS',
  'US',
];

/**
 * A read's bytes as one printable line: valid UTF-8 is shown as text, ASCII control bytes by their
 * names in angle brackets (`<GS>` for the GS1 separator 0x1D, `<CR>`, `<EOT>`…), DEL and C1
 * controls as `\u00NN`, and bytes that are not valid UTF-8 as `\xNN`. Plain text: HTML escaping is
 * the caller's job.
 */
export function printableRaw(raw: Buffer | Uint8Array | string): string {
  if (typeof raw === 'string') return printableText(raw);
  const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  try {
    return printableText(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    let out = '';
    for (const b of bytes)
      out +=
        b >= 0x20 && b < 0x7f
          ? String.fromCharCode(b)
          : b < 0x20
            ? `<${C0_NAMES[b]}>`
            : `\\x${b.toString(16).padStart(2, '0')}`;
    return out;
  }
}

/**
 * Characters that are not shown but act on a terminal or on how text reads: bidirectional
 * embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), the direction marks (U+200E,
 * U+200F, U+061C), and the line and paragraph separators (U+2028, U+2029). A reference holding
 * U+202E prints its tail reversed: `failures`, `trace`… show them as `\u202e`.
 */
const INVISIBLE =
  // eslint-disable-next-line no-control-regex -- control characters are exactly what this makes visible
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const INVISIBLE_BUT_LF =
  // eslint-disable-next-line no-control-regex -- the same, but the line feeds of a whole output
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function visible(c: string): string {
  const code = c.charCodeAt(0);
  return code < 0x20 ? `<${C0_NAMES[code]}>` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `text` inert on a terminal: C0 controls by their names (`<ESC>`, `<BEL>`, `<LF>`), DEL, C1
 * controls and the bidirectional and separator characters of {@link INVISIBLE} as `\uNNNN`; all
 * else as it is. What stored data (a reference, an attribute, a reason) is printed through.
 */
export function printableText(text: string): string {
  return text.replace(INVISIBLE, visible);
}

/**
 * A whole output for a terminal (a formatted report, or JSON text) made inert with its own line
 * feeds kept: every other control and bidirectional character as in {@link printableText}. On JSON
 * text this only changes characters JSON leaves raw (DEL, C1, the bidirectional ones) into `\u`
 * escapes of the same characters, so the JSON still parses to the same value.
 */
export function inertOutput(text: string): string {
  return text.replace(INVISIBLE_BUT_LF, visible);
}

/**
 * A copy of `value` (JSON-like: plain objects, arrays, strings…) with every string, keys included,
 * passed through {@link printableText}: what a formatter then lays out in lines cannot start a line
 * of its own, nor reach the terminal as a control sequence. Other values are kept as they are.
 */
export function printableDeep<T>(value: T): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return printableText(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[printableText(k)] = walk(x);
      return out;
    }
    return v;
  };
  return walk(value) as T;
}
