import { once } from 'node:events';
import { connect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import {
  KafkaBroker,
  makeSandboxTls,
  type SandboxTls,
  Reader,
  Writer,
  KafkaError,
} from '@scan-gateway/sandbox/kafka';
import { waitFor } from '../helpers/wait.js';

// The sandbox broker's bounds and refusals over a real TLS socket, with frames no well-behaved
// client sends (kcat and @platformatic/kafka are in sandbox-kafka-kcat.test.ts and the captures).

let tls: SandboxTls;
let broker: KafkaBroker;

beforeAll(async () => {
  tls = await makeSandboxTls();
  broker = new KafkaBroker({
    host: '127.0.0.1',
    port: 0,
    tls,
    users: [{ user: 'u', password: 'p', topic: 'sandbox-u-status-event' }],
    limits: { maxConnections: 2, maxRequestBytes: 4096 },
    logger: silentLogger(),
  });
  await broker.start();
});
afterAll(async () => broker?.close());

async function open(): Promise<{ socket: TLSSocket; frames: Buffer[]; closed: Promise<unknown> }> {
  const socket = connect({
    host: '127.0.0.1',
    port: broker.port,
    ca: tls.caPem,
    servername: 'localhost',
  });
  await once(socket, 'secureConnect');
  const frames: Buffer[] = [];
  let pending = Buffer.alloc(0);
  socket.on('data', (c: Buffer) => {
    pending = Buffer.concat([pending, c]);
    while (pending.length >= 4 && pending.length >= 4 + pending.readInt32BE(0)) {
      frames.push(pending.subarray(4, 4 + pending.readInt32BE(0)));
      pending = pending.subarray(4 + pending.readInt32BE(0));
    }
  });
  socket.on('error', () => undefined);
  return { socket, frames, closed: once(socket, 'close') };
}

function frame(apiKey: number, version: number, body: Buffer = Buffer.alloc(0)): Buffer {
  const payload = new Writer()
    .int16(apiKey)
    .int16(version)
    .int32(7)
    .string('raw', false)
    .push(body)
    .finish();
  return Buffer.concat([new Writer().int32(payload.length).finish(), payload]);
}

describe('sandbox Kafka broker on a raw TLS socket', () => {
  it('answers an ApiVersions of an unknown version in v0 with UNSUPPORTED_VERSION and its ranges (KIP-511)', async () => {
    const c = await open();
    c.socket.write(frame(18, 99));
    const answer = await waitFor(() => c.frames[0], { what: 'the ApiVersions answer' });
    const r = new Reader(answer);
    expect(r.int32()).toBe(7);
    expect(r.int16()).toBe(KafkaError.UNSUPPORTED_VERSION);
    expect(r.int32()).toBeGreaterThan(10); // api key entries
    c.socket.destroy();
  });

  it('closes a connection that asks for Metadata before authenticating', async () => {
    const c = await open();
    c.socket.write(frame(3, 1, new Writer().int32(-1).finish()));
    await c.closed;
    expect(c.frames).toEqual([]);
  });

  it('closes a connection whose frame is larger than maxRequestBytes, before reading it', async () => {
    const c = await open();
    c.socket.write(new Writer().int32(1_000_000).finish());
    await c.closed;
    expect(c.frames).toEqual([]);
  });

  it('keeps at most maxConnections open', async () => {
    // The sockets of the earlier tests count until the server has seen them close.
    await waitFor(() => broker.connectionCount === 0);
    const a = await waitFor(() => open());
    const b = await waitFor(() => open());
    const third = connect({
      host: '127.0.0.1',
      port: broker.port,
      ca: tls.caPem,
      servername: 'localhost',
    });
    // The server takes the TCP connection and drops it at once: the TLS handshake never completes.
    const error = await new Promise<Error>((resolve) => third.on('error', resolve));
    expect(error.message).toMatch(
      /disconnected before secure TLS connection was established|ECONNRESET/,
    );
    a.socket.destroy();
    b.socket.destroy();
  });
});
