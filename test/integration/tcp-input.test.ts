import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { tcpInputSchema, type TcpInputConfig } from '../../src/inputs/tcp/schema.js';
import { TcpInput } from '../../src/inputs/tcp/tcp-input.js';
import type { IntakeItem, IntakeSink } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { waitFor } from '../helpers/wait.js';

/** Stand-in for intake: each submit is one commit; `failing` refuses like a full disk. */
class RecordingSink implements IntakeSink {
  readonly items: IntakeItem[] = [];
  failing = false;
  async submit(items: IntakeItem[]): Promise<void> {
    if (this.failing) throw new Error('SQLITE_FULL');
    this.items.push(...items);
  }
  texts(): string[] {
    return this.items.map((i) =>
      i.kind === 'read'
        ? i.read.raw.toString('latin1')
        : `<${i.rejection.reason}|${i.rejection.raw.toString('latin1')}>`,
    );
  }
}

let sink: RecordingSink;
const inputs: TcpInput[] = [];
const servers: Server[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const input of inputs.splice(0)) await input.stop();
  for (const s of sockets.splice(0)) s.destroy();
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

function config(overrides: Partial<Record<keyof TcpInputConfig, unknown>>): TcpInputConfig {
  return tcpInputSchema.parse({
    id: 'cam',
    type: 'tcp',
    dcp: 'EOL',
    host: '127.0.0.1',
    port: 0,
    reconnectMs: 50,
    reconnectMaxMs: 200,
    ...overrides,
  });
}

async function startInput(cfg: TcpInputConfig): Promise<TcpInput> {
  sink ??= new RecordingSink();
  const input = new TcpInput({ config: cfg, sink, logger: silentLogger(), submitRetryBaseMs: 50 });
  inputs.push(input);
  await input.start();
  return input;
}

/** A fixed-mount "reader" listening for the gateway; answers its sockets as they come. */
async function reader(
  port = 0,
): Promise<{ server: Server; port: number; next(): Promise<Socket> }> {
  const waiting: ((s: Socket) => void)[] = [];
  const arrived: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    const w = waiting.shift();
    if (w) w(socket);
    else arrived.push(socket);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address();
  return {
    server,
    port: typeof address === 'object' && address ? address.port : 0,
    next: () =>
      new Promise((resolve) =>
        arrived.length > 0 ? resolve(arrived.shift()!) : waiting.push(resolve),
      ),
  };
}

function collect(socket: Socket): () => string {
  let got = '';
  socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
  return () => got;
}

async function connectTo(port: number): Promise<Socket> {
  const socket = createConnection({ host: '127.0.0.1', port });
  sockets.push(socket);
  await new Promise((resolve) => socket.once('connect', resolve));
  return socket;
}

describe('TcpInput, client mode (gateway connects to the reader)', () => {
  it('frames reads, acknowledges each after commit, and reconnects when the reader drops the connection', async () => {
    sink = new RecordingSink();
    const cam = await reader();
    const input = await startInput(
      config({
        mode: 'client',
        port: cam.port,
        ackBytes: '\x06',
        nakBytes: '\x15',
        maxReadLength: 8,
      }),
    );
    expect(input.status()).toMatchObject({ state: 'up', source: `tcp://127.0.0.1:${cam.port}` });
    const first = await cam.next();
    const acks = collect(first);
    first.write('AAA\rBBB\rTOOLONGREAD\rCC');
    await waitFor(() => acks() === '\x06\x06\x15', { what: 'ack, ack, nak' });
    first.destroy();
    await waitFor(() => sink.texts().length === 4, { what: 'cut-off read stored' });
    expect(sink.texts()).toEqual([
      'AAA',
      'BBB',
      '<read longer than 8 bytes: 11 bytes up to its terminator were dropped; the first 9 are kept|TOOLONGRE>',
      '<connection closed before the read was complete|CC>',
    ]);

    const second = await cam.next();
    await waitFor(() => input.status().state === 'up', { what: 'up again' });
    second.write('DDD\r');
    await waitFor(() => sink.texts().at(-1) === 'DDD', { what: 'read after reconnect' });
    expect(sink.items.at(-1)).toMatchObject({
      read: { origin: { peer: `127.0.0.1:${cam.port}` } },
    });
  });

  it('is down with the reason while the reader is unreachable, and connects once it listens', async () => {
    sink = new RecordingSink();
    const probe = await reader();
    const port = probe.port;
    await new Promise((resolve) => probe.server.close(resolve));
    servers.length = 0;
    const input = await startInput(config({ mode: 'client', port }));
    expect(input.status().state).toBe('down');
    expect(input.status().lastError).toMatch(/ECONNREFUSED/);
    const cam = await reader(port);
    const socket = await cam.next();
    await waitFor(() => input.status().state === 'up', { what: 'up after the reader appeared' });
    socket.write('LATE\r');
    await waitFor(() => sink.texts().includes('LATE'));
  });

  it('drops and reconnects a connection silent for idleTimeoutMs', async () => {
    sink = new RecordingSink();
    const cam = await reader();
    await startInput(config({ mode: 'client', port: cam.port, idleTimeoutMs: 150 }));
    await cam.next();
    const again = await cam.next();
    again.write('HEARTBEAT-OK\r');
    await waitFor(() => sink.texts().includes('HEARTBEAT-OK'));
  });
});

describe('TcpInput, server mode (readers connect to the gateway)', () => {
  it('takes STX…ETX reads from two readers at once, each answered on its own connection', async () => {
    sink = new RecordingSink();
    const input = await startInput(
      config({ mode: 'server', framing: 'stxEtx', ackBytes: 'OK\r', nakBytes: 'NG\r' }),
    );
    const { port } = input.address()!;
    // Listening is not reading: with no reader connected the input says so.
    expect(input.status()).toMatchObject({
      state: 'waiting for reader',
      source: 'tcp-listen://127.0.0.1:0',
      readers: { count: 0, expected: 0, connected: [] },
    });
    const a = await connectTo(port);
    const b = await connectTo(port);
    const ackA = collect(a);
    const ackB = collect(b);
    a.write('\x02A-1\x03\r\n\x02A-');
    b.write('junk\x02B-1\x03');
    a.write('2\x03');
    await waitFor(() => ackA() === 'OK\rOK\r' && ackB() === 'NG\rOK\r', {
      what: 'acks per connection',
    });
    expect(sink.texts().sort()).toEqual([
      '<bytes outside STX…ETX (4 bytes)|junk>',
      'A-1',
      'A-2',
      'B-1',
    ]);
    await waitFor(() => input.connectionCount === 2);
    const status = input.status();
    expect(status).toMatchObject({ state: 'up', readers: { count: 2 } });
    expect(status.readers?.connected.map((r) => r.address).sort()).toEqual(
      [a, b].map((s) => `127.0.0.1:${s.localPort}`).sort(),
    );
    expect(Date.parse(status.readers?.connected[0]?.since ?? '')).not.toBeNaN();
    a.destroy();
    await waitFor(() => input.connectionCount === 1, { what: 'closed connection forgotten' });
    expect(input.status()).toMatchObject({ state: 'up', readers: { count: 1 } });
    b.destroy();
    await waitFor(() => input.status().state === 'waiting for reader', {
      what: 'waiting again once the last reader left',
    });
  });

  it('ends an overlong read without a terminator at a pause, so the next read survives; CRLF works on a CR terminator', async () => {
    sink = new RecordingSink();
    const input = await startInput(
      config({
        mode: 'server',
        maxReadLength: 64,
        overlongPauseMs: 100,
        ackBytes: '+',
        nakBytes: '-',
      }),
    );
    const s = await connectTo(input.address()!.port);
    const answers = collect(s);
    s.write('L'.repeat(5000));
    // The pause ends the overlong read: its NAK comes then, and the next reads come after it.
    await waitFor(() => answers() === '-', { what: 'nak for the overlong read at the pause' });
    s.write('TCP-AFTER-LONG\r\nTCP-NEXT\r\n');
    await waitFor(() => answers() === '-++', {
      what: 'nak for the overlong read, ack for the two after it',
    });
    expect(sink.texts()).toEqual([
      `<read longer than 64 bytes: 5000 bytes up to a pause of 100 ms were dropped; the first 65 are kept|${'L'.repeat(65)}>`,
      'TCP-AFTER-LONG',
      'TCP-NEXT',
    ]);
  });

  it('frames by silence for readers that send data as is', async () => {
    sink = new RecordingSink();
    const input = await startInput(config({ mode: 'server', framing: 'silence', silenceMs: 40 }));
    const s = await connectTo(input.address()!.port);
    s.write('RAW');
    s.write('DATA');
    // The silence ended the first read: the next bytes are a read of their own.
    await waitFor(() => sink.texts().length === 1, { what: 'the first read, at the silence' });
    s.write('NEXT');
    await waitFor(() => sink.texts().length === 2);
    expect(sink.texts()).toEqual(['RAWDATA', 'NEXT']);
  });

  it('holds data while paused (TCP flow control) and takes it all on resume', async () => {
    sink = new RecordingSink();
    const input = await startInput(config({ mode: 'server' }));
    const s = await connectTo(input.address()!.port);
    await waitFor(() => input.connectionCount === 1);
    input.setPaused(true);
    expect(input.status().state).toBe('paused');
    s.write('P-1\rP-2\r');
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(sink.items).toHaveLength(0);
    input.setPaused(false);
    await waitFor(() => sink.texts().length === 2);
    expect(sink.texts()).toEqual(['P-1', 'P-2']);
    expect(input.status().state).toBe('up');
  });

  it('keeps reads the buffer refuses, naks them once, and stores them when it works again', async () => {
    sink = new RecordingSink();
    sink.failing = true;
    const input = await startInput(config({ mode: 'server', ackBytes: '+', nakBytes: '-' }));
    const s = await connectTo(input.address()!.port);
    const answers = collect(s);
    s.write('KEEP-1\r');
    await waitFor(() => answers() === '-', { what: 'nak on refusal' });
    sink.failing = false;
    await waitFor(() => sink.texts().includes('KEEP-1'), {
      what: 'stored after the buffer recovered',
    });
    s.write('KEEP-2\r');
    await waitFor(() => answers() === '-+', {
      what: "no late ack for the nak'd read; ack for the next",
    });
  });

  it('is down while the port is taken and listens once it is free', async () => {
    sink = new RecordingSink();
    const taken = await reader();
    const input = await startInput(config({ mode: 'server', port: taken.port }));
    expect(input.status().state).toBe('down');
    expect(input.status().lastError).toMatch(/EADDRINUSE/);
    await new Promise((resolve) => taken.server.close(resolve));
    servers.length = 0;
    await waitFor(() => input.status().state === 'waiting for reader', {
      what: 'listening after the port was freed',
    });
    const s = await connectTo(taken.port);
    s.write('FREE\r');
    await waitFor(() => sink.texts().includes('FREE'));
  });
});
