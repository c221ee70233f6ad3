import { createRequire } from 'node:module';
import type { Transform } from 'node:stream';
import type { IPublishPacket, MqttClient } from 'mqtt';
import { ErrorCodes, GatewayError } from '../../errors.js';

/**
 * Every use the gateway makes of mqtt.js beyond its documented API, in one place. Nothing else in
 * src/ touches mqtt.js internals; the MQTT input calls {@link assertMqttInternals} on each client
 * it creates, before connecting it, so that an mqtt.js without these hooks refuses to start with
 * an error naming its version, instead of silently acknowledging too early or reading unbounded
 * payloads. package.json pins mqtt to {@link MQTT_TESTED}, the versions these hooks were tested
 * with (test/unit/mqtt-internals.test.ts, test/integration/mqtt-input.test.ts). Moving to another
 * mqtt.js minor version means reading its `client.js` and `handlers/publish.js` against the
 * docstrings below, running those tests, and updating the pin and this constant together.
 */

/** The mqtt versions the hooks below were tested with: the range package.json pins. */
export const MQTT_TESTED = '~5.16.0';

/** The version of the mqtt package this process loaded ('unknown' when its package.json cannot be read). */
export function installedMqttVersion(): string {
  try {
    // mqtt's package "exports" lists "./package.json", so this resolves to the copy `import 'mqtt'` loads.
    const pkg = createRequire(import.meta.url)('mqtt/package.json') as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

type SendPacket = (
  packet: { cmd: 'puback'; messageId: number },
  cb?: (err?: Error) => void,
) => void;
type StreamBuilder = (client: MqttClient) => NodeJS.ReadWriteStream;

/** The private members of an mqtt.js 5 `MqttClient` the hooks use. */
interface ClientInternals {
  _sendPacket: SendPacket;
  streamBuilder: StreamBuilder;
  handleMessage: (packet: IPublishPacket, callback: (err?: Error) => void) => void;
}

const internals = (client: MqttClient): Partial<ClientInternals> =>
  client as unknown as Partial<ClientInternals>;

/** One hook: its name in messages, and whether `client` has it in the shape the hook expects. */
const HOOKS: readonly { name: string; present: (c: Partial<ClientInternals>) => boolean }[] = [
  { name: '_sendPacket (a method)', present: (c) => typeof c._sendPacket === 'function' },
  {
    // An own property: mqtt.js reads `this.streamBuilder` in connect(); a private field would not see a replacement.
    name: 'streamBuilder (an own property holding a function)',
    present: (c) =>
      Object.prototype.hasOwnProperty.call(c, 'streamBuilder') &&
      typeof c.streamBuilder === 'function',
  },
  // (packet, callback): the deferred acknowledgement answers through the callback.
  {
    name: 'handleMessage(packet, callback)',
    present: (c) => typeof c.handleMessage === 'function' && c.handleMessage.length === 2,
  },
];

/**
 * Checks that `client` has every hook below in the expected shape. Call on a new client, before
 * any of the hooks is installed and before it connects.
 *
 * @throws GatewayError `SCANGW_E_INPUT` naming the installed mqtt version, the tested range and
 *   the hooks missing.
 */
export function assertMqttInternals(client: MqttClient): void {
  const c = internals(client);
  const missing = HOOKS.filter((h) => !h.present(c)).map((h) => h.name);
  if (missing.length === 0) return;
  const version = installedMqttVersion();
  throw new GatewayError(
    ErrorCodes.INPUT,
    `mqtt ${version} lacks what the MQTT input relies on (${missing.join(', ')}); the gateway is tested with mqtt ${MQTT_TESTED}: install a version in that range`,
    { details: { mqttVersion: version, mqttTested: MQTT_TESTED, missing } },
  );
}

/**
 * Passed to mqtt.js's `handleMessage` callback by {@link takeMessagesUnacknowledged}: "taken,
 * acknowledge later". Never thrown, never logged: mqtt.js drops it.
 */
const DEFER_PUBACK = new GatewayError(
  ErrorCodes.INPUT,
  'PUBACK deferred until the read is committed',
);

/**
 * Hands every received PUBLISH to `onMessage` without mqtt.js acknowledging it; `next()` lets
 * mqtt.js go on to the next packet. The gateway acknowledges a QoS 1 message itself once its read
 * is committed ({@link sendPuback}), while taking the messages behind it meanwhile (many in
 * flight, one group commit); holding `next` back is the input's back-pressure.
 *
 * Relies on mqtt.js 5 `handlers/publish.js`: for QoS 1 it calls `handleMessage(packet, cb)` and
 * sends the PUBACK in `cb` only when `cb` gets no error; given an error it passes it to the packet
 * loop's `done`, which (client.js `connect()`, `nextTickWork`) ignores it and handles the next
 * packet. QoS 0 calls `handleMessage(packet, done)` directly, the same loop. Overriding
 * `handleMessage` is documented; answering it with an error to skip the PUBACK is not. Without
 * this, a PUBACK would leave before the commit (a crash loses the read), or `next` would wait for
 * each commit (one message per commit).
 */
export function takeMessagesUnacknowledged(
  client: MqttClient,
  onMessage: (packet: IPublishPacket, next: () => void) => void,
): void {
  client.handleMessage = (packet, callback) => onMessage(packet, () => callback(DEFER_PUBACK));
}

/**
 * Writes a PUBACK for `messageId` on the client's current connection: the acknowledgement
 * {@link takeMessagesUnacknowledged} kept mqtt.js from sending.
 *
 * Relies on mqtt.js 5's private `MqttClient._sendPacket(packet, cb)`, the call its own
 * `handlers/publish.js` uses for the PUBACK (a packet other than PUBLISH and PUBREL is written at
 * once, not stored). mqtt.js has no public call that sends a bare PUBACK.
 */
export function sendPuback(client: MqttClient, messageId: number): void {
  (client as unknown as ClientInternals)._sendPacket({ cmd: 'puback', messageId });
}

/**
 * Puts a stream from `between()` between the network and mqtt.js's packet parser, on every
 * connection the client makes (a new one each time). Call before `client.connect()` (create the
 * client with `manualConnect: true`). The gateway puts its PublishLimiter there: mqtt.js's parser
 * (mqtt-packet) holds a packet whole before handing it over, so a huge PUBLISH must be cut before it.
 *
 * Relies on mqtt.js 5 `MqttClient.connect()`: it calls the instance's `streamBuilder(client)` once
 * per connection and pipes the stream it returns, synchronously, into the writable that feeds the
 * parser (`this.stream.pipe(writable)`); that pipe goes through `between()` instead. Should mqtt.js
 * stop piping it, the connection is destroyed with an error rather than read without the stream.
 */
export function pipeBeforeParser(client: MqttClient, between: () => Transform): void {
  const c = client as unknown as ClientInternals;
  const build = c.streamBuilder;
  c.streamBuilder = (cl) => {
    const stream = build(cl);
    const pipe = stream.pipe.bind(stream);
    let piped = false;
    stream.pipe = (<T extends NodeJS.WritableStream>(
      destination: T,
      options?: { end?: boolean },
    ): T => {
      piped = true;
      return pipe(between(), options).pipe(destination, options);
    }) as typeof stream.pipe;
    queueMicrotask(() => {
      if (piped) return;
      const err = new GatewayError(
        ErrorCodes.INPUT,
        `mqtt ${installedMqttVersion()} did not pipe its connection stream into its parser; the gateway is tested with mqtt ${MQTT_TESTED}: install a version in that range`,
      );
      (stream as NodeJS.ReadWriteStream & { destroy?: (err: Error) => void }).destroy?.(err);
    });
    return stream;
  };
}
