import { C0_NAMES } from '../format/printable.js';
import type { InputConfig } from '../config/schema.js';

/** A read as typed on the command line, made the bytes a scanner sends, and the input's own limits on it. */

/** `<NUL>` … `<US>` as `failures` and the health page print them (printableRaw), and `<FNC1>` (= GS). */
const NAMED_BYTES = new Map<string, number>([
  ...C0_NAMES.map((n, i) => [n, i] as const),
  ['FNC1', 0x1d],
]);
const ESCAPE = new RegExp(`<(${[...NAMED_BYTES.keys()].join('|')})>|\\\\x([0-9A-Fa-f]{2})`, 'gi');

/**
 * Turns a read typed on a command line into the bytes a scanner sends: `<GS>`, `<CR>` and every
 * other C0 name (`<FNC1>` = GS) and `\xHH` become single bytes, so a raw read that `failures`
 * prints (`\xe9`, `<CR>`) pasted here reproduces it byte for byte, invalid UTF-8 included.
 * Everything else is taken as written, in UTF-8.
 */
export function unescapeRead(text: string): Buffer {
  const parts: Buffer[] = [];
  let last = 0;
  for (const m of text.matchAll(ESCAPE)) {
    parts.push(Buffer.from(text.slice(last, m.index), 'utf8'));
    parts.push(
      Buffer.from([
        m[1] !== undefined ? NAMED_BYTES.get(m[1].toUpperCase())! : parseInt(m[2]!, 16),
      ]),
    );
    last = m.index + m[0].length;
  }
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  return Buffer.concat(parts);
}

/**
 * What the input itself refuses before any mapping: a serial/TCP read over `maxReadLength`, an
 * MQTT payload over `maxPayloadBytes` (the input stores it as a rejection).
 */
export function lengthLimit(input: InputConfig, bytes: number): string | undefined {
  if (
    'maxReadLength' in input &&
    typeof input.maxReadLength === 'number' &&
    bytes > input.maxReadLength
  ) {
    return `read longer than ${input.maxReadLength} bytes (maxReadLength of input ${input.id}): the input stores it as a rejection`;
  }
  if (
    'maxPayloadBytes' in input &&
    typeof input.maxPayloadBytes === 'number' &&
    bytes > input.maxPayloadBytes
  ) {
    return `payload larger than ${input.maxPayloadBytes} bytes (maxPayloadBytes of input ${input.id}): the input stores it as a rejection`;
  }
  return undefined;
}
