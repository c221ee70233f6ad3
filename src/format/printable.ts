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

function printableText(text: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what this makes visible
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x20 ? `<${C0_NAMES[code]}>` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
