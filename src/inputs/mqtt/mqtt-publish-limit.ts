import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

/**
 * A bound on what one PUBLISH can cost the gateway in memory, for MQTT 3.1.1 (which has no
 * maximum packet size) and for brokers that ignore MQTT 5's.
 *
 * mqtt.js (mqtt-packet's parser) keeps every byte of a packet until the packet is complete, so a
 * 50 MB payload is held whole before the input can refuse it. This stream sits between the
 * socket and that parser (put there by `pipeBeforeParser`, mqtt-internals.ts): it reads each
 * packet's fixed header, and a PUBLISH whose payload is larger than the limit goes on to the parser cut down to its first `keepBytes` (the input uses
 * `maxPayloadBytes + 1`: still over the limit, so a cut payload is refused even without its
 * {@link PublishCut}), with its remaining length rewritten. The rest of the payload is only hashed (SHA-256) and counted as
 * it streams past; the parser sees an ordinary, small PUBLISH. The cut is reported first
 * ({@link PublishCut}), so the input stores a rejection that names the real size, and the
 * message's identity (for resends) uses the hash of the whole payload.
 *
 * Packet layout: MQTT 3.1.1 §2.2 (fixed header, remaining length) and §3.3 (PUBLISH: topic,
 * packet id when QoS > 0, payload); MQTT 5 §3.3.2.3 adds properties after the packet id.
 */

/** A PUBLISH that reached the parser cut to its first bytes. */
export interface PublishCut {
  topic: string;
  /** Packet id (QoS > 0). */
  messageId: number | undefined;
  /** Size of the whole payload, in bytes. */
  payloadBytes: number;
  /** SHA-256 of the whole payload. */
  payloadSha256: Buffer;
  /** How many bytes of the payload the parser got. */
  keptBytes: number;
}

const PUBLISH = 3;
/** Longest variable header collected to find the payload: topic (2 + 65,535), packet id, properties. */
const MAX_VARIABLE_HEADER = 2 + 65_535 + 2 + 4 + 65_536;
/** Cuts remembered and not yet matched to their message (see {@link PublishCuts}). */
const MAX_CUTS = 100;

type Mode = 'header' | 'pass' | 'collect' | 'cut';

export class PublishLimiter extends Transform {
  private mode: Mode = 'header';
  private header: number[] = [];
  private remaining = 0;
  /** Bytes of the current packet still to come (pass, collect, cut). */
  private left = 0;
  private collected: Buffer[] = [];
  private collectedBytes = 0;
  private variableHeader = Buffer.alloc(0);
  private cut:
    | {
        topic: string;
        messageId: number | undefined;
        payloadBytes: number;
        hash: Hash;
        kept: Buffer[];
        keptBytes: number;
        keepBytes: number;
      }
    | undefined;

  /**
   * @param maxPayloadBytes a PUBLISH with a larger payload is cut
   * @param keepBytes how many payload bytes of a cut PUBLISH reach the parser
   * @param protocolVersion 4 (3.1.1) or 5: whether a PUBLISH carries properties
   * @param onCut called with each cut, before its packet goes on to the parser
   */
  constructor(
    private readonly maxPayloadBytes: number,
    private readonly keepBytes: number,
    private readonly protocolVersion: number,
    private readonly onCut: (cut: PublishCut) => void,
  ) {
    super();
  }

  /** What this chunk passes on; pushed as one buffer at its end (one parse per socket read, as without the limiter). */
  private out: Buffer[] = [];

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.mode === 'header') {
        at = this.readHeader(chunk, at);
      } else if (this.mode === 'pass') {
        const n = Math.min(this.left, chunk.length - at);
        this.pass(chunk.subarray(at, at + n));
        at += n;
        this.left -= n;
        if (this.left === 0) this.mode = 'header';
      } else if (this.mode === 'collect') {
        const n = Math.min(this.left, chunk.length - at);
        this.collected.push(chunk.subarray(at, at + n));
        this.collectedBytes += n;
        at += n;
        this.left -= n;
        this.afterCollect();
      } else {
        const n = Math.min(this.left, chunk.length - at);
        this.takePayload(chunk.subarray(at, at + n));
        at += n;
        this.left -= n;
        if (this.left === 0) this.finishCut();
      }
    }
    const out = this.out;
    this.out = [];
    if (out.length > 0) this.push(out.length === 1 ? out[0]! : Buffer.concat(out));
    done();
  }

  private pass(bytes: Buffer): void {
    this.out.push(bytes);
  }

  /** Reads fixed-header bytes from `at`; answers where it stopped. */
  private readHeader(chunk: Buffer, at: number): number {
    while (at < chunk.length) {
      const byte = chunk[at++]!;
      this.header.push(byte);
      if (this.header.length === 1) continue;
      if ((byte & 0x80) !== 0 && this.header.length < 5) continue;
      // The remaining length is complete (MQTT §1.5.5: at most 4 bytes; a 5th would be malformed,
      // which the parser reports, so it is passed on unchanged).
      this.remaining = decodeLength(this.header);
      const type = this.header[0]! >> 4;
      if (type === PUBLISH && this.remaining > this.maxPayloadBytes && (byte & 0x80) === 0) {
        this.mode = 'collect';
        this.left = this.remaining;
        this.collected = [];
        this.collectedBytes = 0;
      } else {
        this.pass(Buffer.from(this.header));
        this.header = [];
        this.left = this.remaining;
        this.mode = this.left > 0 ? 'pass' : 'header';
      }
      return at;
    }
    return at;
  }

  /** In `collect`: once the variable header is known, pass the packet on whole or start cutting it. */
  private afterCollect(): void {
    const bytes = this.collected.length === 1 ? this.collected[0]! : Buffer.concat(this.collected);
    this.collected = [bytes];
    const length = variableHeaderLength(bytes, (this.header[0]! >> 1) & 0x03, this.protocolVersion);
    if (length === undefined && this.left > 0 && this.collectedBytes < MAX_VARIABLE_HEADER) return;
    const payloadBytes = length === undefined ? 0 : this.remaining - length;
    if (length === undefined || payloadBytes <= this.maxPayloadBytes) {
      // Small enough after all (a long topic), or not a PUBLISH the parser will accept: unchanged.
      this.pass(Buffer.from(this.header));
      this.pass(bytes);
      this.header = [];
      this.collected = [];
      this.mode = this.left > 0 ? 'pass' : 'header';
      return;
    }
    const qos = (this.header[0]! >> 1) & 0x03;
    const topicLength = bytes.readUInt16BE(0);
    this.variableHeader = Buffer.from(bytes.subarray(0, length));
    this.cut = {
      topic: bytes.toString('utf8', 2, 2 + topicLength),
      messageId: qos > 0 ? bytes.readUInt16BE(2 + topicLength) : undefined,
      payloadBytes,
      hash: createHash('sha256'),
      kept: [],
      keptBytes: 0,
      keepBytes: Math.min(this.keepBytes, payloadBytes),
    };
    this.collected = [];
    this.mode = 'cut';
    this.takePayload(bytes.subarray(length));
    if (this.left === 0) this.finishCut();
  }

  private takePayload(part: Buffer): void {
    const cut = this.cut!;
    cut.hash.update(part);
    if (cut.keptBytes < cut.keepBytes) {
      const keep = part.subarray(0, cut.keepBytes - cut.keptBytes);
      cut.kept.push(Buffer.from(keep));
      cut.keptBytes += keep.length;
    }
  }

  private finishCut(): void {
    const cut = this.cut!;
    this.cut = undefined;
    const kept = Buffer.concat(cut.kept);
    this.onCut({
      topic: cut.topic,
      messageId: cut.messageId,
      payloadBytes: cut.payloadBytes,
      payloadSha256: cut.hash.digest(),
      keptBytes: kept.length,
    });
    this.pass(
      Buffer.concat([
        Buffer.from([this.header[0]!]),
        encodeLength(this.variableHeader.length + kept.length),
        this.variableHeader,
        kept,
      ]),
    );
    this.header = [];
    this.variableHeader = Buffer.alloc(0);
    this.mode = 'header';
  }
}

/** Length of a PUBLISH's variable header in `bytes`, or undefined while more bytes are needed. */
function variableHeaderLength(
  bytes: Buffer,
  qos: number,
  protocolVersion: number,
): number | undefined {
  if (bytes.length < 2) return undefined;
  let length = 2 + bytes.readUInt16BE(0) + (qos > 0 ? 2 : 0);
  if (protocolVersion === 5) {
    let multiplier = 1;
    let properties = 0;
    for (let i = 0; ; i++) {
      if (i >= 4) return undefined;
      const byte = bytes[length + i];
      if (byte === undefined) return undefined;
      properties += (byte & 0x7f) * multiplier;
      multiplier *= 128;
      if ((byte & 0x80) === 0) {
        length += i + 1 + properties;
        break;
      }
    }
  }
  return bytes.length >= length ? length : undefined;
}

function decodeLength(header: number[]): number {
  let value = 0;
  let multiplier = 1;
  for (let i = 1; i < header.length; i++) {
    value += (header[i]! & 0x7f) * multiplier;
    multiplier *= 128;
  }
  return value;
}

function encodeLength(value: number): Buffer {
  const out: number[] = [];
  do {
    let byte = value % 128;
    value = Math.floor(value / 128);
    if (value > 0) byte |= 0x80;
    out.push(byte);
  } while (value > 0);
  return Buffer.from(out);
}

/**
 * The cuts of one client, matched to the messages mqtt.js hands over: by topic, packet id and
 * payload length. Bounded ({@link MAX_CUTS}, oldest dropped): a cut whose message never reaches the
 * input (its connection dropped first) must not stay forever.
 */
export class PublishCuts {
  private readonly cuts: PublishCut[] = [];

  add(cut: PublishCut): void {
    this.cuts.push(cut);
    if (this.cuts.length > MAX_CUTS) this.cuts.shift();
  }

  /** The cut of this message, removed; undefined when it came whole. */
  take(topic: string, messageId: number | undefined, payload: Buffer): PublishCut | undefined {
    const at = this.cuts.findIndex(
      (c) => c.topic === topic && c.messageId === messageId && c.keptBytes === payload.length,
    );
    return at < 0 ? undefined : this.cuts.splice(at, 1)[0];
  }

  clear(): void {
    this.cuts.length = 0;
  }
}
