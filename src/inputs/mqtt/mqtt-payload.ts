import type { MqttInputConfig } from './schema.js';
import { REJECTION_RAW_MAX_BYTES, rejectionItem } from '../input-items.js';
import { jsonRead, jsonReadProblem, readFromJsonFields } from '../json-read.js';
import type { IntakeItem } from '../types.js';

/**
 * What one MQTT message becomes: a read, or an input-level rejection (too big, not UTF-8, not
 * JSON, a field missing or of the wrong type, a topic outside `dcpFromTopic`). Pure.
 */

/** The parts of an MQTT input's configuration that decide what a payload means. */
export type MqttPayloadConfig = Pick<
  MqttInputConfig,
  'id' | 'format' | 'fields' | 'maxPayloadBytes' | 'dcpFromTopic'
>;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Matches `topic` against a `dcpFromTopic` pattern (`plant/{dcp}/scans`; `+` any one level, `#`
 * the rest) and answers the `{dcp}` level, or undefined when the topic does not fit the pattern
 * or its `{dcp}` level is empty.
 */
export function dcpFromTopic(pattern: string, topic: string): string | undefined {
  const want = pattern.split('/');
  const have = topic.split('/');
  let dcp: string | undefined;
  for (let i = 0; i < want.length; i++) {
    const w = want[i];
    if (w === '#') break;
    const h = have[i];
    if (h === undefined) return undefined;
    if (w === '{dcp}') dcp = h;
    else if (w !== '+' && w !== h) return undefined;
    if (i === want.length - 1 && have.length !== want.length) return undefined;
  }
  return dcp === '' ? undefined : dcp;
}

/**
 * Turns one message into an item (`payloadBytes`: the size of the whole payload when `payload`
 * holds only its first bytes). `text`: the payload is the barcode (a trailing CR/LF, which some
 * bridges append, is dropped; every other byte kept). `json`: the payload is a JSON read (see
 * `jsonRead`): code, time stamp, DCP, parents, attributes from the configured field paths. The
 * DCP is, first found: the JSON field, the topic's `{dcp}` level, the input's `dcp`.
 */
export function messageToItem(
  config: MqttPayloadConfig,
  topic: string,
  payload: Buffer,
  receivedAt: Date,
  payloadBytes = payload.length,
): IntakeItem {
  const origin = { topic };
  const reject = (reason: string): IntakeItem =>
    rejectionItem(config.id, payload, reason, receivedAt, origin);
  if (payloadBytes > config.maxPayloadBytes) {
    // `payload` may be only the first bytes (the stream cut the rest, mqtt-publish-limit.ts).
    const kept = Math.min(payload.length, REJECTION_RAW_MAX_BYTES);
    const note = kept < payloadBytes ? ` (first ${kept} of ${payloadBytes} bytes kept)` : '';
    return rejectionItem(
      config.id,
      payload.subarray(0, kept),
      `payload of ${payloadBytes} bytes is larger than maxPayloadBytes (${config.maxPayloadBytes})${note}`,
      receivedAt,
      origin,
    );
  }
  let topicDcp: string | undefined;
  if (config.dcpFromTopic !== undefined) {
    topicDcp = dcpFromTopic(config.dcpFromTopic, topic);
    if (topicDcp === undefined)
      return reject(`topic "${topic}" does not match dcpFromTopic "${config.dcpFromTopic}"`);
  }

  if (config.format === 'text') {
    let end = payload.length;
    while (end > 0 && (payload[end - 1] === 0x0a || payload[end - 1] === 0x0d)) end -= 1;
    if (end === 0) return reject('empty payload');
    const raw = Buffer.from(payload.subarray(0, end));
    return {
      kind: 'read',
      read: {
        inputId: config.id,
        raw,
        receivedAt,
        ...(topicDcp !== undefined ? { dcpKey: topicDcp } : {}),
        origin,
      },
    };
  }

  let text: string;
  try {
    text = utf8.decode(payload);
  } catch {
    return reject('payload is not valid UTF-8, so it is not JSON');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return reject(`payload is not JSON: ${(err as Error).message}`);
  }
  const result = jsonRead(value, config.fields);
  if (!result.ok) return reject(`JSON payload: ${jsonReadProblem(result)}`);
  return {
    kind: 'read',
    read: readFromJsonFields(result.fields, config.id, receivedAt, origin, topicDcp),
  };
}
