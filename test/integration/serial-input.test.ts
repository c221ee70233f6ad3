import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { serialInputSchema, type SerialInputConfig } from '../../src/inputs/serial/schema.js';
import { SerialPort } from 'serialport';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { parseConfigText } from '../../src/config/load.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import {
  openSerialPort,
  SerialInput,
  type SerialOpenOptions,
  type SerialPortLike,
} from '../../src/inputs/serial/serial-input.js';
import { silentLogger } from '../../src/log.js';
import { createPtyPair, type PtyPair } from '../helpers/pty.js';
import { waitFor } from '../helpers/wait.js';
import { CAPTURE_FRAMES, samplePath } from '../helpers/samples.js';
import { FakeSink } from '../helpers/fake-sink.js';
import { sqlOf } from '../helpers/buffer-sql.js';

const CAPTURE_PATH = samplePath('serial-capture-line3.bin');
const NOW = new Date('2026-11-18T06:00:00Z');

/** Every CR-terminated read of serial-capture-line3.bin, latin1 so each byte shows as one char. */

let dir: string;
let sink: FakeSink;
const ptys: PtyPair[] = [];
const inputs: SerialInput[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sg-serial-'));
  sink = new FakeSink();
});

afterEach(async () => {
  for (const input of inputs.splice(0)) await input.stop();
  for (const pty of ptys.splice(0)) await pty.kill();
  await rm(dir, { recursive: true, force: true });
});

async function pty(): Promise<PtyPair> {
  const pair = await createPtyPair(dir);
  ptys.push(pair);
  return pair;
}

async function killPty(pair: PtyPair): Promise<void> {
  ptys.splice(ptys.indexOf(pair), 1);
  await pair.kill();
}

function config(overrides: Partial<SerialInputConfig> = {}): SerialInputConfig {
  return serialInputSchema.parse({
    id: 'line3',
    dcp: 'GI',
    type: 'serial',
    path: join(dir, 'dev'),
    reconnectMs: 150,
    ...overrides,
  });
}

async function startInput(
  overrides: Partial<SerialInputConfig> = {},
  opened: SerialOpenOptions[] = [],
): Promise<SerialInput> {
  const input = new SerialInput({
    config: config(overrides),
    sink,
    logger: silentLogger(),
    now: () => NOW.getTime(),
    submitRetryBaseMs: 50,
    openPort: (options) => {
      opened.push(options);
      return openSerialPort(options);
    },
  });
  inputs.push(input);
  await input.start();
  return input;
}

describe('SerialInput on a socat pty', () => {
  it('submits every read of the line-3 capture with its exact bytes (NOREAD, ERROR, garbage, GS kept)', async () => {
    const pair = await pty();
    const opened: SerialOpenOptions[] = [];
    const input = await startInput({}, opened);
    expect(input.status()).toEqual({
      id: 'line3',
      type: 'serial',
      state: 'up',
      source: pair.devicePath,
    });
    expect(opened).toEqual([
      {
        path: pair.devicePath,
        baudRate: 9600,
        dataBits: 8,
        stopBits: 1,
        parity: 'none',
        flowControl: 'none',
      },
    ]);

    const capture = await readFile(CAPTURE_PATH);
    // Odd-sized pieces so reads and their CR straddle the writes.
    for (let at = 0; at < capture.length; at += 37) await pair.write(capture.subarray(at, at + 37));

    await waitFor(() => sink.items.length >= CAPTURE_FRAMES.length, {
      what: `${CAPTURE_FRAMES.length} reads submitted`,
    });
    expect(sink.texts()).toEqual(CAPTURE_FRAMES);
    const garbage = sink.items[7];
    expect(garbage?.kind === 'read' && [...garbage.read.raw]).toEqual([
      0xff, 0xfe, 0x00, 0x67, 0x61, 0x72, 0x62, 0x61, 0x67, 0x65, 0x80, 0x81,
    ]);
    for (const item of sink.items) {
      expect(item.kind).toBe('read');
      if (item.kind === 'read')
        expect(item.read).toMatchObject({
          inputId: 'line3',
          receivedAt: NOW,
          origin: { port: pair.devicePath },
        });
    }
  });

  it('goes down when the device disappears and reconnects, without restart, when it comes back', async () => {
    const first = await pty();
    const input = await startInput();
    await first.write(Buffer.from('BEFORE\r'));
    await waitFor(() => sink.texts().includes('BEFORE'), { what: 'read before unplug' });

    await killPty(first);
    await waitFor(() => input.status().state === 'down', {
      what: 'state down after the pty was killed',
    });
    expect(input.status().lastError).toContain(join(dir, 'dev'));
    expect(input.status().lastErrorAt).toBe(NOW.toISOString());

    const second = await pty();
    await waitFor(() => input.status().state === 'up', {
      what: 'state up again after the pty came back',
    });
    expect(input.status().lastError).toBeUndefined();
    await second.write(Buffer.from('AFTER\r'));
    await waitFor(() => sink.texts().includes('AFTER'), { what: 'read after reconnect' });
    expect(sink.texts()).toEqual(['BEFORE', 'AFTER']);
  });

  it('goes down when the device vanishes without the port telling it, and comes back', async () => {
    // A port whose close and error never arrive, as with an adapter pulled out that leaves the
    // descriptor silent: only the look at the device path can see it is gone.
    const silent = (options: SerialOpenOptions): SerialPortLike => {
      const port = openSerialPort(options);
      return new Proxy(port, {
        get(target, key, receiver) {
          if (key === 'on')
            return (event: string, listener: (...args: unknown[]) => void) =>
              event === 'close' || event === 'error'
                ? target
                : target.on(event as 'data', listener);
          const value: unknown = Reflect.get(target, key, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    };
    const first = await pty();
    const input = new SerialInput({
      config: config(),
      sink,
      logger: silentLogger(),
      now: () => NOW.getTime(),
      openPort: silent,
      presenceCheckMs: 100,
    });
    inputs.push(input);
    await input.start();
    await first.write(Buffer.from('BEFORE\r'));
    await waitFor(() => sink.texts().includes('BEFORE'), { what: 'read before unplug' });

    await killPty(first);
    await waitFor(() => input.status().state === 'down', { what: 'down once the path is gone' });
    expect(input.status().lastError).toBe(
      `${join(dir, 'dev')}: the device is gone (its path no longer exists)`,
    );

    const second = await pty();
    await waitFor(() => input.status().state === 'up', { what: 'up again on the new device' });
    await second.write(Buffer.from('AFTER\r'));
    await waitFor(() => sink.texts().includes('AFTER'), { what: 'read after it came back' });
    expect(sink.texts()).toEqual(['BEFORE', 'AFTER']);
  });

  it('is down while the device is missing at start and comes up when it appears', async () => {
    const input = await startInput();
    expect(input.status().state).toBe('down');
    expect(input.status().lastError).toMatch(/No such file|ENOENT|cannot open/i);

    const pair = await pty();
    await waitFor(() => input.status().state === 'up', { what: 'state up once the device exists' });
    await pair.write(Buffer.from('LATE\r'));
    await waitFor(() => sink.texts().includes('LATE'), { what: 'read after late device' });
  });

  it('rejects an overlong read with its first bytes, then carries on with the next read', async () => {
    const pair = await pty();
    await startInput({ maxReadLength: 16 });
    await pair.write(Buffer.from(`${'X'.repeat(40)}\rOK\r${'1234567890123456'}\r`));
    await waitFor(() => sink.items.length >= 3, { what: 'rejection and two reads' });
    expect(sink.texts()).toEqual([
      `<read longer than 16 bytes: 40 bytes up to its terminator were dropped; the first 17 are kept|${'X'.repeat(17)}>`,
      'OK',
      '1234567890123456',
    ]);
    const rejection = sink.items[0];
    expect(rejection?.kind === 'rejection' && rejection.rejection).toMatchObject({
      inputId: 'line3',
      origin: { port: pair.devicePath },
    });
  });

  it('frames at a configured CRLF terminator', async () => {
    const pair = await pty();
    await startInput({ terminator: '\r\n' });
    await pair.write(Buffer.from('A\rB\r\nC\r'));
    await pair.write(Buffer.from('\n'));
    await waitFor(() => sink.items.length >= 2, { what: 'two CRLF reads' });
    expect(sink.texts()).toEqual(['A\rB', 'C']);
  });

  it('turns a read cut off by the device going away into a rejection', async () => {
    const pair = await pty();
    const input = await startInput();
    await pair.write(Buffer.from('WHOLE\rPART'));
    await waitFor(() => sink.texts().includes('WHOLE'), { what: 'the whole read' });
    // The bytes of PART went with the same write; give the pty a moment before pulling the plug.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await killPty(pair);
    await waitFor(() => input.status().state === 'down', { what: 'down after kill' });
    await waitFor(() => sink.items.length >= 2, { what: 'the cut-off read' });
    expect(sink.texts()).toEqual(['WHOLE', '<device closed before the read was complete|PART>']);
  });

  it('keeps reads the buffer refuses and submits them once it works again, in order', async () => {
    const pair = await pty();
    sink.failing = true;
    await startInput();
    await pair.write(Buffer.from('R1\rR2\r'));
    await waitFor(() => sink.refused >= 2, { what: 'two refused submits' });
    await pair.write(Buffer.from('R3\r'));
    sink.failing = false;
    await waitFor(() => sink.items.length >= 3, { what: 'all three reads committed' });
    expect(sink.texts()).toEqual(['R1', 'R2', 'R3']);
  });

  it('stop() waits for a submit in flight, closes the port and stops reconnecting', async () => {
    const pair = await pty();
    const opened: SerialOpenOptions[] = [];
    const input = await startInput({}, opened);
    sink.delayMs = 400;
    await pair.write(Buffer.from('LAST\r'));
    await waitFor(() => sink.started === 1, { what: 'submit started' });
    expect(sink.commits).toEqual([]);
    await input.stop();
    expect(sink.texts()).toEqual(['LAST']);
    expect(input.status().state).toBe('stopped');

    // With the port closed and no reconnect timer, a later unplug/replug opens nothing.
    await killPty(pair);
    await pty();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(opened).toHaveLength(1);
    expect(input.status().state).toBe('stopped');
  });

  it("gives the line-3 capture's scans, no-reads, duplicate and rejections through the real intake and SQLite", async () => {
    const pair = await pty();
    const yaml = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps: [{ key: GI, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }]
inputs: [{ id: line3, type: serial, path: ${pair.devicePath}, dcp: GI }]
`;
    const store = BufferStore.openAt(join(dir, 'buffer.db'));
    const intake = new Intake({
      store,
      mapping: mappingContext(parseConfigText(yaml, 'test.yaml')),
      logger: silentLogger(),
    });
    intake.open();
    const input = new SerialInput({ config: config(), sink: intake, logger: silentLogger() });
    inputs.push(input);
    await input.start();
    await pair.write(await readFile(CAPTURE_PATH));
    const outcomes = (): { raw: Buffer; outcome: string; reason: string | null }[] =>
      sqlOf(store).prepare('SELECT raw, outcome, reason FROM reads ORDER BY id').all() as {
        raw: Buffer;
        outcome: string;
        reason: string | null;
      }[];
    try {
      await waitFor(() => outcomes().length === CAPTURE_FRAMES.length, {
        what: 'all reads committed',
      });
      expect(outcomes().map((r) => r.outcome)).toEqual([
        'scan',
        'scan',
        'noRead',
        'scan',
        'duplicate',
        'scan',
        'scan',
        'rejected',
        'rejected',
        'scan',
        'noRead',
      ]);
      const [garbage, badCheck] = outcomes().filter((r) => r.outcome === 'rejected');
      expect(garbage!.reason).toMatch(/not valid UTF-8/);
      expect([...garbage!.raw]).toEqual([
        0xff, 0xfe, 0x00, 0x67, 0x61, 0x72, 0x62, 0x61, 0x67, 0x65, 0x80, 0x81,
      ]);
      expect(badCheck!.reason).toMatch(/check digit/i);
      expect(intake.countersFor('line3')).toMatchObject({
        reads: 11,
        scans: 6,
        noReads: 2,
        duplicates: 1,
        rejections: 2,
      });
    } finally {
      await input.stop();
      inputs.splice(inputs.indexOf(input), 1);
      intake.close();
      store.close();
    }
  });

  it('writes ackBytes back after each committed read and nakBytes for an overlong one (the scanner beeps)', async () => {
    const pair = await pty();
    await startInput({ ackBytes: '\x06', nakBytes: '\x15', maxReadLength: 8 });
    const answers = await listen(pair.peerPath);
    await pair.write(Buffer.from('GOOD-1\rMUCH-TOO-LONG\rGOOD-2\r'));
    await waitFor(() => answers() === '\x06\x15\x06', { what: 'ACK, NAK, ACK at the scanner' });
    expect(sink.texts()).toEqual([
      'GOOD-1',
      '<read longer than 8 bytes: 13 bytes up to its terminator were dropped; the first 9 are kept|MUCH-TOO->',
      'GOOD-2',
    ]);
  });

  it('naks reads the buffer refuses at once, and still stores them once it works again', async () => {
    const pair = await pty();
    sink.failing = true;
    await startInput({ ackBytes: 'A', nakBytes: 'N' });
    const answers = await listen(pair.peerPath);
    await pair.write(Buffer.from('HELD\r'));
    await waitFor(() => answers() === 'N', { what: 'NAK on refusal' });
    sink.failing = false;
    await waitFor(() => sink.texts().includes('HELD'), { what: 'stored later' });
    await pair.write(Buffer.from('NEXT\r'));
    await waitFor(() => answers() === 'NA', {
      what: 'no late ACK for the NAKed read; ACK for the next',
    });
  });

  it('frames STX…ETX reads and strips a configured prefix and suffix', async () => {
    const pair = await pty();
    await startInput({
      framing: 'stxEtx',
      stripPrefix: 'P:',
      stripSuffix: '#',
      flowControl: 'xonxoff',
    });
    await pair.write(
      Buffer.from('\x02P:ABC#\x03\r\n\x02DEF\x03noise\x02P:GHI\x03\r\nnoise\r\n\x02JKL\x03'),
    );
    await waitFor(() => sink.items.length >= 6, { what: 'four reads and the noise twice' });
    // The CR LF after an ETX is not noise, nor counted into the noise after it: each noise is its 5 bytes.
    expect(sink.texts()).toEqual([
      'ABC',
      'DEF',
      '<bytes outside STX…ETX (5 bytes)|noise>',
      'GHI',
      '<bytes outside STX…ETX (5 bytes)|noise>',
      'JKL',
    ]);
  });

  it('after an overlong read without a terminator, a pause ends it: the next read is stored, the rejection counts the dropped bytes', async () => {
    const pair = await pty();
    const yaml = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps: [{ key: GI, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-1 }]
inputs: [{ id: line3, type: serial, path: ${pair.devicePath}, dcp: GI }]
`;
    const store = BufferStore.openAt(join(dir, 'buffer.db'));
    const intake = new Intake({
      store,
      mapping: mappingContext(parseConfigText(yaml, 'test.yaml')),
      logger: silentLogger(),
    });
    intake.open();
    const input = new SerialInput({ config: config(), sink: intake, logger: silentLogger() });
    inputs.push(input);
    await input.start();
    const rows = (): { raw: Buffer; outcome: string; reason: string | null }[] =>
      sqlOf(store).prepare('SELECT raw, outcome, reason FROM reads ORDER BY id').all() as {
        raw: Buffer;
        outcome: string;
        reason: string | null;
      }[];
    try {
      await pair.write(Buffer.alloc(10_240, 'L'));
      // The pause alone ends the overlong read: its rejection is committed before the next byte comes.
      await waitFor(() => rows().length === 1, {
        timeoutMs: 30_000,
        what: 'the overlong read ended by the pause and committed',
      }).catch((err: unknown) => {
        throw new Error(
          `${(err as Error).message}; rows: ${JSON.stringify(rows().map((r) => ({ ...r, raw: r.raw.toString('latin1').slice(0, 40) })))}`,
        );
      });
      await pair.write(Buffer.from('SER-AFTER-LONG-8\r'));
      await waitFor(() => rows().length === 2, {
        timeoutMs: 30_000,
        what: 'the read after it committed',
      }).catch((err: unknown) => {
        throw new Error(
          `${(err as Error).message}; rows: ${JSON.stringify(rows().map((r) => ({ ...r, raw: r.raw.toString('latin1').slice(0, 40) })))}`,
        );
      });
      const [rejected, scan] = rows();
      expect(rejected).toMatchObject({
        outcome: 'rejected',
        reason:
          'read longer than 4096 bytes: 10240 bytes up to a pause of 200 ms were dropped; the first 256 are kept',
      });
      expect(rejected!.raw.toString('latin1')).toBe('L'.repeat(256));
      expect(scan).toMatchObject({ outcome: 'scan', reason: null });
      expect(scan!.raw.toString('latin1')).toBe('SER-AFTER-LONG-8');
      expect(intake.countersFor('line3')).toMatchObject({ reads: 1, scans: 1, rejections: 1 });
    } finally {
      await input.stop();
      inputs.splice(inputs.indexOf(input), 1);
      intake.close();
      store.close();
    }
  });

  it('takes every read of a scanner sending CRLF on the default CR terminator (not rejected as <LF>SER-AFTER-4)', async () => {
    const pair = await pty();
    await startInput();
    for (const read of ['SER-CRLF-1', 'SER-CRLF-2', 'SER-CRLF-3', 'SER-AFTER-4']) {
      await pair.write(Buffer.from(`${read}\r\n`));
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    await waitFor(() => sink.items.length >= 4, { what: 'four reads' });
    expect(sink.texts()).toEqual(['SER-CRLF-1', 'SER-CRLF-2', 'SER-CRLF-3', 'SER-AFTER-4']);
  });

  it('takes CRLF reads on a LF terminator, and rejects a CR-only read there with the hint what to set', async () => {
    const pair = await pty();
    await startInput({ terminator: '\n' });
    await pair.write(Buffer.from('SER-CRLF-1\r\nSER-CR-2\rSER-CRLF-3\r\n'));
    await waitFor(() => sink.items.length >= 2, { what: 'a read and a rejection' });
    expect(sink.texts()).toEqual([
      'SER-CRLF-1',
      '<the read holds CR (0x0d) at position 8: looks like the scanner ends reads with CR, not LF; set terminator: "\\r" on this input, or make the scanner send LF|SER-CR-2\rSER-CRLF-3>',
    ]);
  });

  it('rejects a read holding a LF on a CR terminator with the hint what to set (such as SER-LF-2<LF>SER-CRLF-3)', async () => {
    const pair = await pty();
    await startInput({ ackBytes: '\x06', nakBytes: '\x15' });
    const answers = await listen(pair.peerPath);
    await pair.write(Buffer.from('SER-LF-2\nSER-CRLF-3\r\nSER-CRLF-4\r\n'));
    await waitFor(() => answers() === '\x15\x06', {
      what: 'NAK for the rejection, ACK for the read',
    });
    expect(sink.texts()).toEqual([
      '<the read holds LF (0x0a) at position 8: looks like the scanner ends reads with LF, not CR; set terminator: "\\n" on this input, or make the scanner send CR|SER-LF-2\nSER-CRLF-3>',
      'SER-CRLF-4',
    ]);
  });
});

const listeners: SerialPort[] = [];
afterEach(async () => {
  for (const port of listeners.splice(0))
    if (port.isOpen) await new Promise((resolve) => port.close(resolve));
});

/** Opens the scanner's end of the pty for reading: what the gateway writes back arrives here. */
async function listen(peerPath: string): Promise<() => string> {
  const port = new SerialPort({ path: peerPath, baudRate: 9600, autoOpen: false, hupcl: false });
  await new Promise<void>((resolve, reject) => port.open((err) => (err ? reject(err) : resolve())));
  listeners.push(port);
  let got = '';
  port.on('data', (d: Buffer) => (got += d.toString('latin1')));
  return () => got;
}
