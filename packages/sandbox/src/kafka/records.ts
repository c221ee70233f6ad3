import { malformed, Reader, Writer } from './codec.js';

/**
 * Record batch v2 (magic 2, https://kafka.apache.org/documentation/#recordbatch) and its
 * CRC-32C (Castagnoli, RFC 3720 appendix B.4), which covers everything from the attributes to the
 * end of the batch.
 */

const CRC32C_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32C of `buf`, as an unsigned 32-bit number. `crc32c("123456789") === 0xe3069283`. */
export function crc32c(buf: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of buf) crc = (CRC32C_TABLE[(crc ^ byte) & 0xff] ?? 0) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** One record header. */
export interface RecordHeader {
  key: string;
  value: Buffer | null;
}

/** One record as the broker keeps it. `timestamp` in ms since the epoch. */
export interface StoredRecord {
  offset: number;
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: RecordHeader[];
}

/** Records of one batch as a producer sent them, before the log gives them offsets. */
export interface ProducedRecord {
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: RecordHeader[];
}

/** Bytes of a batch header up to and including the record count (61). */
const BATCH_HEADER = 61;

/**
 * Encodes records (consecutive offsets, first one `records[0].offset`) as one uncompressed batch,
 * CreateTime timestamps, no producer id. Empty input gives an empty buffer.
 */
export function encodeBatch(records: StoredRecord[]): Buffer {
  const first = records[0];
  if (!first) return Buffer.alloc(0);
  const baseTimestamp = first.timestamp;
  let maxTimestamp = baseTimestamp;
  const body = new Writer();
  records.forEach((rec, i) => {
    maxTimestamp = Math.max(maxTimestamp, rec.timestamp);
    const w = new Writer();
    w.int8(0); // record attributes: unused
    w.varlong(rec.timestamp - baseTimestamp);
    w.varint(i);
    if (rec.key === null) w.varint(-1);
    else w.varint(rec.key.length).push(rec.key);
    if (rec.value === null) w.varint(-1);
    else w.varint(rec.value.length).push(rec.value);
    w.varint(rec.headers.length);
    for (const h of rec.headers) {
      const k = Buffer.from(h.key, 'utf8');
      w.varint(k.length).push(k);
      if (h.value === null) w.varint(-1);
      else w.varint(h.value.length).push(h.value);
    }
    const bytes = w.finish();
    body.varint(bytes.length).push(bytes);
  });
  const crcPart = new Writer()
    .int16(0) // attributes: no compression, CreateTime, not transactional, not control
    .int32(records.length - 1) // last offset delta
    .int64(baseTimestamp)
    .int64(maxTimestamp)
    .int64(-1) // producer id
    .int16(-1) // producer epoch
    .int32(-1) // base sequence
    .int32(records.length)
    .push(body.finish())
    .finish();
  return new Writer()
    .int64(first.offset)
    .int32(crcPart.length + 9) // batch length: from the partition leader epoch on
    .int32(0) // partition leader epoch
    .int8(2) // magic
    .uint32(crc32c(crcPart))
    .push(crcPart)
    .finish();
}

/**
 * Decodes the batches of a Produce request's `records`. Throws {@link malformed} (a
 * CORRUPT_MESSAGE for the producer) for a wrong magic, a wrong CRC-32C or a short batch;
 * `{ compressed: true }` when a batch is compressed (the sandbox stores plain records only).
 */
export function decodeBatches(buf: Buffer): { records: ProducedRecord[] } | { compressed: true } {
  const r = new Reader(buf);
  const records: ProducedRecord[] = [];
  while (r.remaining() > 0) {
    if (r.remaining() < BATCH_HEADER) throw malformed('record batch shorter than its header');
    r.int64(); // base offset: the producer's, replaced by the log's
    const length = r.int32();
    const batch = new Reader(r.take(length));
    batch.int32(); // partition leader epoch
    const magic = batch.int8();
    if (magic !== 2) throw malformed(`record batch magic ${magic}, only 2 is spoken`);
    const crc = batch.uint32();
    const covered = batch.buf.subarray(batch.offset);
    if (crc32c(covered) !== crc) throw malformed('record batch CRC-32C does not match');
    const attributes = batch.int16();
    if ((attributes & 0x07) !== 0) return { compressed: true };
    batch.int32(); // last offset delta
    const baseTimestamp = batch.int64();
    batch.int64(); // max timestamp
    batch.int64(); // producer id
    batch.int16(); // producer epoch
    batch.int32(); // base sequence
    const count = batch.int32();
    if (count < 0 || count > batch.remaining()) throw malformed(`record count ${count}`);
    for (let i = 0; i < count; i++) {
      const len = batch.varint();
      const rec = new Reader(batch.take(len));
      rec.int8();
      const timestamp = baseTimestamp + rec.varlong();
      rec.varint(); // offset delta
      const key = varBytes(rec);
      const value = varBytes(rec);
      const headerCount = rec.varint();
      if (headerCount < 0 || headerCount > rec.remaining())
        throw malformed(`header count ${headerCount}`);
      const headers: RecordHeader[] = [];
      for (let h = 0; h < headerCount; h++) {
        const k = varBytes(rec);
        headers.push({ key: k?.toString('utf8') ?? '', value: varBytes(rec) });
      }
      records.push({ timestamp, key, value, headers });
    }
  }
  return { records };
}

function varBytes(r: Reader): Buffer | null {
  const n = r.varint();
  return n < 0 ? null : Buffer.from(r.take(n));
}
