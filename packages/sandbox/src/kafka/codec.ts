import { ErrorCodes, GatewayError } from '@scan-gateway/service-kit/errors';

/**
 * The Kafka wire primitives (https://kafka.apache.org/protocol#protocol_types) and a codec driven
 * by compact message schemas (see `messages.ts`), written after the message definitions of
 * apache/kafka `clients/src/main/resources/common/message/*.json`: each field has a version range,
 * and a message has the versions from which it is "flexible" (compact strings, arrays and bytes,
 * tagged fields). Nullability needs no flag here: a null is written as length -1 (or compact 0) and
 * read back as null whatever the schema says, which is all a broker needs.
 */

/** A field type: a primitive, or an array (`[type]`) of a primitive or of a struct (`Field[]`). */
export type FieldType =
  | 'int8'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'bool'
  | 'string'
  | 'bytes'
  | 'uuid'
  | { array: FieldType | Field[] };

/** `[name, type, versions]`; versions as in the JSON definitions: `"3+"`, `"0-4"`, `"5"`; default all. */
export type Field = readonly [name: string, type: FieldType | Field[], versions?: string];

/** A message (request or response body) schema. */
export interface MessageSchema {
  /** First flexible version; undefined = never flexible. */
  flexibleFrom?: number;
  fields: Field[];
}

/** A decoded message: field names to values; int64 as number (offsets and times stay below 2^53). */
export type Message = Record<string, unknown>;

/** Whether `version` lies in a range written as in the JSON definitions (`"3+"`, `"0-4"`, `"5"`, `"none"`). */
export function inVersions(range: string | undefined, version: number): boolean {
  if (range === undefined) return true;
  if (range === 'none') return false;
  if (range.endsWith('+')) return version >= Number(range.slice(0, -1));
  const [from, to] = range.split('-');
  return to === undefined
    ? version === Number(from)
    : version >= Number(from) && version <= Number(to);
}

/** Malformed input: the connection that sent it is closed (as a broker does). */
export function malformed(what: string): GatewayError {
  return new GatewayError(ErrorCodes.SANDBOX_KAFKA, `malformed Kafka frame: ${what}`);
}

/** Reads primitives from a buffer; every read checks the bounds and throws {@link malformed}. */
export class Reader {
  offset = 0;
  constructor(readonly buf: Buffer) {}

  private need(n: number): void {
    if (n < 0 || this.offset + n > this.buf.length)
      throw malformed(`needs ${n} bytes at ${this.offset}, has ${this.buf.length - this.offset}`);
  }
  remaining(): number {
    return this.buf.length - this.offset;
  }
  int8(): number {
    this.need(1);
    return this.buf.readInt8(this.offset++);
  }
  int16(): number {
    this.need(2);
    const v = this.buf.readInt16BE(this.offset);
    this.offset += 2;
    return v;
  }
  int32(): number {
    this.need(4);
    const v = this.buf.readInt32BE(this.offset);
    this.offset += 4;
    return v;
  }
  uint32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    return v;
  }
  int64(): number {
    this.need(8);
    const v = this.buf.readBigInt64BE(this.offset);
    this.offset += 8;
    return Number(v);
  }
  /** Unsigned LEB128 varint (up to 32 bits). */
  uvarint(): number {
    let value = 0;
    for (let shift = 0; shift <= 28; shift += 7) {
      this.need(1);
      const byte = this.buf[this.offset++] ?? 0;
      value += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) return value;
    }
    throw malformed('varint longer than 5 bytes');
  }
  /** Zig-zag signed varint (32 bits). */
  varint(): number {
    const u = this.uvarint();
    return u % 2 === 0 ? u / 2 : -(u + 1) / 2;
  }
  /** Zig-zag signed varlong (64 bits), as a number. */
  varlong(): number {
    let value = 0n;
    for (let shift = 0n; shift <= 63n; shift += 7n) {
      this.need(1);
      const byte = BigInt(this.buf[this.offset++] ?? 0);
      value |= (byte & 0x7fn) << shift;
      if ((byte & 0x80n) === 0n) return Number((value >> 1n) ^ -(value & 1n));
    }
    throw malformed('varlong longer than 10 bytes');
  }
  take(n: number): Buffer {
    this.need(n);
    const out = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }
  string(compact: boolean): string | null {
    const n = compact ? this.uvarint() - 1 : this.int16();
    if (n < 0) return null;
    return this.take(n).toString('utf8');
  }
  bytes(compact: boolean): Buffer | null {
    const n = compact ? this.uvarint() - 1 : this.int32();
    if (n < 0) return null;
    return this.take(n);
  }
  /** Skips a tagged-field section (KIP-482): none of the tagged fields matter to the sandbox. */
  skipTags(): void {
    const count = this.uvarint();
    for (let i = 0; i < count; i++) {
      this.uvarint();
      this.take(this.uvarint());
    }
  }
}

/** Collects bytes; `finish()` gives one buffer. */
export class Writer {
  private chunks: Buffer[] = [];
  private size = 0;
  push(b: Buffer): this {
    this.chunks.push(b);
    this.size += b.length;
    return this;
  }
  int8(v: number): this {
    const b = Buffer.alloc(1);
    b.writeInt8(v);
    return this.push(b);
  }
  int16(v: number): this {
    const b = Buffer.alloc(2);
    b.writeInt16BE(v);
    return this.push(b);
  }
  int32(v: number): this {
    const b = Buffer.alloc(4);
    b.writeInt32BE(v);
    return this.push(b);
  }
  uint32(v: number): this {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(v >>> 0);
    return this.push(b);
  }
  int64(v: number | bigint): this {
    const b = Buffer.alloc(8);
    b.writeBigInt64BE(BigInt(v));
    return this.push(b);
  }
  uvarint(v: number): this {
    const out: number[] = [];
    let rest = v;
    while (rest >= 0x80) {
      out.push((rest & 0x7f) | 0x80);
      rest = Math.floor(rest / 128);
    }
    out.push(rest);
    return this.push(Buffer.from(out));
  }
  varint(v: number): this {
    return this.uvarint(v >= 0 ? v * 2 : -v * 2 - 1);
  }
  varlong(v: number | bigint): this {
    const n = BigInt(v);
    let z = (n << 1n) ^ (n >> 63n);
    z &= (1n << 64n) - 1n;
    const out: number[] = [];
    while (z >= 0x80n) {
      out.push(Number(z & 0x7fn) | 0x80);
      z >>= 7n;
    }
    out.push(Number(z));
    return this.push(Buffer.from(out));
  }
  string(v: string | null, compact: boolean): this {
    if (v === null) return compact ? this.uvarint(0) : this.int16(-1);
    const b = Buffer.from(v, 'utf8');
    if (compact) this.uvarint(b.length + 1);
    else this.int16(b.length);
    return this.push(b);
  }
  bytes(v: Buffer | null, compact: boolean): this {
    if (v === null) return compact ? this.uvarint(0) : this.int32(-1);
    if (compact) this.uvarint(v.length + 1);
    else this.int32(v.length);
    return this.push(v);
  }
  length(): number {
    return this.size;
  }
  finish(): Buffer {
    return Buffer.concat(this.chunks, this.size);
  }
}

function readValue(
  r: Reader,
  type: FieldType | Field[],
  version: number,
  flexible: boolean,
): unknown {
  if (Array.isArray(type)) return readStruct(r, type, version, flexible);
  if (typeof type === 'object') {
    const n = flexible ? r.uvarint() - 1 : r.int32();
    if (n < 0) return null;
    // Each element takes at least one byte: a count beyond the bytes left is a lie, not a big array.
    if (n > r.remaining()) throw malformed(`array of ${n} elements in ${r.remaining()} bytes`);
    const items: unknown[] = [];
    for (let i = 0; i < n; i++) items.push(readValue(r, type.array, version, flexible));
    return items;
  }
  switch (type) {
    case 'int8':
      return r.int8();
    case 'int16':
      return r.int16();
    case 'int32':
      return r.int32();
    case 'int64':
      return r.int64();
    case 'bool':
      return r.int8() !== 0;
    case 'string':
      return r.string(flexible);
    case 'bytes':
      return r.bytes(flexible);
    case 'uuid':
      return r.take(16).toString('hex');
  }
}

function readStruct(r: Reader, fields: Field[], version: number, flexible: boolean): Message {
  const out: Message = {};
  for (const [name, type, versions] of fields) {
    if (!inVersions(versions, version)) continue;
    out[name] = readValue(r, type, version, flexible);
  }
  if (flexible) r.skipTags();
  return out;
}

function writeValue(
  w: Writer,
  type: FieldType | Field[],
  value: unknown,
  version: number,
  flexible: boolean,
  name: string,
): void {
  if (Array.isArray(type)) {
    writeStruct(w, type, (value ?? {}) as Message, version, flexible);
    return;
  }
  if (typeof type === 'object') {
    if (value === null || value === undefined) {
      if (flexible) w.uvarint(0);
      else w.int32(-1);
      return;
    }
    const items = value as unknown[];
    if (flexible) w.uvarint(items.length + 1);
    else w.int32(items.length);
    for (const item of items) writeValue(w, type.array, item, version, flexible, name);
    return;
  }
  switch (type) {
    case 'int8':
      w.int8(num(value));
      return;
    case 'int16':
      w.int16(num(value));
      return;
    case 'int32':
      w.int32(num(value));
      return;
    case 'int64':
      w.int64(num(value));
      return;
    case 'bool':
      w.int8(value === true ? 1 : 0);
      return;
    case 'string':
      w.string(typeof value === 'string' ? value : null, flexible);
      return;
    case 'bytes':
      w.bytes(Buffer.isBuffer(value) ? value : null, flexible);
      return;
    case 'uuid':
      w.push(
        typeof value === 'string' && value.length === 32
          ? Buffer.from(value, 'hex')
          : Buffer.alloc(16),
      );
      return;
  }
}

function num(v: unknown): number {
  return typeof v === 'number' ? v : 0;
}

function writeStruct(
  w: Writer,
  fields: Field[],
  value: Message,
  version: number,
  flexible: boolean,
): void {
  for (const [name, type, versions] of fields) {
    if (!inVersions(versions, version)) continue;
    writeValue(w, type, value[name], version, flexible, name);
  }
  if (flexible) w.uvarint(0);
}

/** Decodes a message body of `version`. Throws {@link malformed} on short or lying input. */
export function decodeMessage(schema: MessageSchema, version: number, r: Reader): Message {
  return readStruct(r, schema.fields, version, isFlexible(schema, version));
}

/** Encodes a message body of `version`; absent numbers are 0, absent strings and arrays null. */
export function encodeMessage(
  schema: MessageSchema,
  version: number,
  value: Message,
  w: Writer = new Writer(),
): Writer {
  writeStruct(w, schema.fields, value, version, isFlexible(schema, version));
  return w;
}

export function isFlexible(schema: MessageSchema, version: number): boolean {
  return schema.flexibleFrom !== undefined && version >= schema.flexibleFrom;
}
