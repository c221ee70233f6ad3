import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { Transform } from 'node:stream';
import { connect, type MqttClient } from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import {
  assertMqttInternals,
  installedMqttVersion,
  MQTT_TESTED,
  pipeBeforeParser,
  sendPuback,
  takeMessagesUnacknowledged,
} from '../../src/inputs/mqtt/mqtt-internals.js';

// The mqtt.js this test runs against, read without the module under test.
const INSTALLED: string = (
  JSON.parse(
    readFileSync(new URL('../../node_modules/mqtt/package.json', import.meta.url), 'utf8'),
  ) as { version: string }
).version;
const PINNED: unknown = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    dependencies: Record<string, unknown>;
  }
).dependencies['mqtt'];

/** Clients that connected; one never connected has nothing to end (mqtt.js's end() would fail on its missing stream). */
const connected: MqttClient[] = [];
const servers: Server[] = [];

afterEach(async () => {
  for (const c of connected.splice(0)) c.end(true);
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A real mqtt.js client that never connects by itself (manualConnect; no reconnect). */
function realClient(port = 1): MqttClient {
  return connect(`mqtt://127.0.0.1:${port}`, {
    manualConnect: true,
    reconnectPeriod: 0,
    protocolVersion: 4,
    keepalive: 0,
    clientId: 'sg-internals-test',
  });
}

function refusal(client: MqttClient): GatewayError {
  try {
    assertMqttInternals(client);
  } catch (err) {
    return err as GatewayError;
  }
  throw new GatewayError(
    ErrorCodes.INTERNAL,
    'assertMqttInternals accepted a client without the hook',
  );
}

// A ceiling that only catches a hang (a loaded machine delays the broker and the client).
async function until(what: string, cond: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end)
      throw new GatewayError(ErrorCodes.INTERNAL, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('the mqtt.js version', () => {
  it('is read from the installed package', () => {
    expect(installedMqttVersion()).toBe(INSTALLED);
  });

  it('package.json pins mqtt to the tested range, and the installed version is in it', () => {
    expect(PINNED).toBe(MQTT_TESTED);
    const [major, minor] = MQTT_TESTED.replace(/^~/, '').split('.');
    expect(INSTALLED.split('.').slice(0, 2)).toEqual([major, minor]);
  });
});

describe('assertMqttInternals', () => {
  it('passes on a real client of the installed mqtt.js', () => {
    expect(() => assertMqttInternals(realClient())).not.toThrow();
  });

  // Each hook taken away, or given another shape, on a real client.
  const breakages: { hook: string; name: RegExp; brk: (c: Record<string, unknown>) => void }[] = [
    {
      hook: '_sendPacket gone',
      name: /_sendPacket/,
      brk: (c) => Object.defineProperty(c, '_sendPacket', { value: undefined }),
    },
    {
      hook: '_sendPacket not a function',
      name: /_sendPacket/,
      brk: (c) => Object.defineProperty(c, '_sendPacket', { value: {} }),
    },
    { hook: 'streamBuilder gone', name: /streamBuilder/, brk: (c) => delete c['streamBuilder'] },
    {
      hook: 'streamBuilder not a function',
      name: /streamBuilder/,
      brk: (c) => (c['streamBuilder'] = 'tcp'),
    },
    {
      hook: 'handleMessage gone',
      name: /handleMessage/,
      brk: (c) => Object.defineProperty(c, 'handleMessage', { value: undefined }),
    },
    {
      hook: 'handleMessage without a callback',
      name: /handleMessage/,
      brk: (c) => (c['handleMessage'] = (_packet: unknown) => Promise.resolve()),
    },
  ];
  for (const { hook, name, brk } of breakages) {
    it(`refuses a client with ${hook}, naming the installed mqtt version and the tested range`, () => {
      const client = realClient();
      brk(client as unknown as Record<string, unknown>);
      const err = refusal(client);
      expect(err).toBeInstanceOf(GatewayError);
      expect(err.code).toBe(ErrorCodes.INPUT);
      expect(err.message).toContain(`mqtt ${INSTALLED} `);
      expect(err.message).toContain(MQTT_TESTED);
      expect(err.message).toMatch(name);
      expect(err.details).toMatchObject({ mqttVersion: INSTALLED, mqttTested: MQTT_TESTED });
    });
  }

  it('names every missing hook at once', () => {
    const client = realClient() as unknown as Record<string, unknown>;
    delete client['streamBuilder'];
    Object.defineProperty(client, '_sendPacket', { value: undefined });
    expect(refusal(client as unknown as MqttClient).details['missing']).toHaveLength(2);
  });
});

describe('the hooks on the installed mqtt.js, against a minimal broker (mqtt-packet on a socket)', () => {
  it('every message is taken without a PUBACK from mqtt.js; sendPuback sends each; the stream goes through the given one', async () => {
    const fromClient: mqttPacket.Packet[] = [];
    const server = createServer((socket) => {
      const parser = mqttPacket.parser({ protocolVersion: 4 });
      parser.on('packet', (p) => {
        fromClient.push(p);
        if (p.cmd !== 'connect') return;
        socket.write(mqttPacket.generate({ cmd: 'connack', returnCode: 0, sessionPresent: false }));
        for (const messageId of [7, 8]) {
          socket.write(
            mqttPacket.generate({
              cmd: 'publish',
              topic: 't',
              payload: Buffer.from(`m${messageId}`),
              qos: 1,
              dup: false,
              retain: false,
              messageId,
            }),
          );
        }
      });
      socket.on('data', (b: Buffer) => parser.parse(b));
      socket.on('error', () => undefined);
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = realClient((server.address() as AddressInfo).port);
    const errors: Error[] = [];
    client.on('error', (err) => errors.push(err));

    assertMqttInternals(client);
    let streams = 0;
    let bytes = 0;
    pipeBeforeParser(client, () => {
      streams++;
      return new Transform({
        transform(chunk: Buffer, _enc, cb) {
          bytes += chunk.length;
          cb(null, chunk);
        },
      });
    });
    const taken: number[] = [];
    takeMessagesUnacknowledged(client, (packet, next) => {
      taken.push(packet.messageId!);
      next();
    });
    client.connect();
    connected.push(client);

    // The second message came: answering the first through `next` let mqtt.js go on.
    await until('both messages', () => taken.length === 2);
    expect(taken).toEqual([7, 8]);
    const pubacks = (): number[] =>
      fromClient
        .filter((p) => p.cmd === 'puback')
        .map((p) => (p as mqttPacket.IPubackPacket).messageId!);
    // PUBACK 8 first: had mqtt.js acknowledged 7 when it was taken, its PUBACK would be ahead on the wire.
    sendPuback(client, 8);
    await until('PUBACK 8', () => pubacks().length >= 1);
    sendPuback(client, 7);
    await until('PUBACK 7', () => pubacks().length >= 2);
    expect(pubacks()).toEqual([8, 7]);
    expect(streams).toBe(1);
    expect(bytes).toBeGreaterThan(0);
    expect(errors).toEqual([]);
  });

  it('a connection stream mqtt.js does not pipe is destroyed with an error naming the version', async () => {
    const client = realClient();
    pipeBeforeParser(client, () => new Transform());
    // The builder called as mqtt.js would, but its stream never piped.
    const stream = (
      client as unknown as { streamBuilder: (c: MqttClient) => NodeJS.ReadWriteStream }
    ).streamBuilder(client);
    const err = await new Promise<Error>((resolve) => stream.once('error', resolve));
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.message).toContain(`mqtt ${INSTALLED} `);
    expect(err.message).toContain(MQTT_TESTED);
  });
});
