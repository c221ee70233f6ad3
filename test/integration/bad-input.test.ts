import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { connectAsync, type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { parseConfigText } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/schema.js';
import type { BuiltInInputConfig } from '../../src/inputs/registry.js';
import { FilesInput } from '../../src/inputs/files/files-input.js';
import { HttpIngestInput } from '../../src/inputs/http/http-input.js';
import { INGEST_PATH } from '../../src/inputs/http/ingest-routes.js';
import { MqttInput } from '../../src/inputs/mqtt/mqtt-input.js';
import { SerialInput } from '../../src/inputs/serial/serial-input.js';
import { TcpInput } from '../../src/inputs/tcp/tcp-input.js';
import type { InputAdapter } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { startMosquitto, type Broker } from '../helpers/mosquitto.js';
import { createPtyPair, type PtyPair } from '../helpers/pty.js';
import { waitFor } from '../helpers/wait.js';
import { sqlOf } from '../helpers/buffer-sql.js';

/**
 * Robustness: thousands of generated malformed inputs (random bytes, overlong reads, invalid
 * UTF-8, control bytes, broken JSON and CSV) through every adapter into the REAL intake and SQLite
 * buffer, with good reads in between. Every malformed input must become exactly one rejection with
 * a reason, every good read a scan, and every adapter must still be up. Seeded: a failure repeats.
 */

const SEED = 20261118;
const MAX_READ = 256;
const TOKEN = 'bad-input-token-0123456789';

/** mulberry32: a small seeded PRNG, so the generated inputs are the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = rng(SEED);
const int = (min: number, max: number): number => min + Math.floor(random() * (max - min + 1));
const pick = <T>(list: readonly T[]): T => list[int(0, list.length - 1)]!;
const bytes = (n: number, allowed: (b: number) => boolean): Buffer => {
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) {
    let b: number;
    do b = int(0, 255);
    while (!allowed(b));
    out[i] = b;
  }
  return out;
};

/** One malformed serial/TCP frame (terminator CR never inside), each certain to be rejected. */
function badFrame(): Buffer {
  const notCr = (b: number): boolean => b !== 0x0d;
  switch (int(0, 3)) {
    case 0: // random bytes, with a 0xFF that no UTF-8 text holds
      return Buffer.concat([
        bytes(int(0, 40), notCr),
        Buffer.from([0xff]),
        bytes(int(0, 40), notCr),
      ]);
    case 1: // overlong
      return bytes(int(MAX_READ + 1, MAX_READ * 3), notCr);
    case 2: // invalid UTF-8: a lone continuation byte or a truncated sequence in text
      return Buffer.concat([
        Buffer.from(`CELL-${int(0, 999)}`),
        Buffer.from(pick([[0x80], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80]])),
      ]);
    default: // a control byte no barcode carries
      return Buffer.from(
        `AB${String.fromCharCode(pick([0x01, 0x07, 0x0b, 0x1b, 0x7f]))}CD`,
        'latin1',
      );
  }
}

const GOOD_JSON = (): string =>
  JSON.stringify({ code: 'X-1', ts: '2026-11-18T07:00:00Z', parents: ['P'], attributes: { a: 1 } });

/**
 * One malformed JSON read (MQTT payload, HTTP body, ndjson line), each certain to be rejected.
 * With `maxBytes`, some are simply too big (only where a size limit applies: payload, body).
 */
function badJson(maxBytes?: number): Buffer {
  switch (int(0, maxBytes === undefined ? 5 : 6)) {
    case 0: {
      const whole = GOOD_JSON(); // any strict prefix of an object is not JSON
      return Buffer.from(whole.slice(0, int(1, whole.length - 1)));
    }
    case 1:
      return Buffer.from(pick(['[1,2]', '"text"', '42', 'null', 'true', '[]']));
    case 2:
      return Buffer.from(JSON.stringify({ ts: '2026-11-18T07:00:00Z', nocode: int(0, 9) }));
    case 3:
      return Buffer.from(
        JSON.stringify(
          pick([
            { code: 123 },
            { code: '' },
            { code: 'A', parents: [1] },
            { code: 'A', attributes: { x: { y: 1 } } },
            { code: 'A', dcp: 'a b' },
            { code: 'A', ts: 5 },
          ]),
        ),
      );
    case 4:
      return Buffer.concat([
        Buffer.from('{"code":"'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('"}'),
      ]);
    case 5:
      return bytes(
        int(1, 60),
        (b) => b !== 0x0a && b !== 0x0d && b !== 0x20 && b !== 0x09 && b !== 0x7b,
      );
    default:
      return Buffer.from(JSON.stringify({ code: 'BIG', pad: 'x'.repeat(maxBytes ?? 0) }));
  }
}

/** One malformed CSV row (`barcode,note`), each certain to be rejected. */
function badCsvRow(): Buffer {
  const safe = (b: number): boolean => b !== 0x2c && b !== 0x22 && b !== 0x0a && b !== 0x0d;
  switch (int(0, 3)) {
    case 0:
      return Buffer.from(',note');
    case 1:
      return Buffer.concat([
        bytes(int(MAX_READ + 1, MAX_READ * 2), (b) => safe(b) && b > 0x20),
        Buffer.from(',note'),
      ]);
    case 2:
      // High bytes may form valid UTF-8 by chance; a 0xFF never does.
      return Buffer.concat([
        Buffer.from('C-'),
        bytes(int(0, 20), (b) => safe(b) && b >= 0x80),
        Buffer.from([0xff]),
        Buffer.from(',note'),
      ]);
    default:
      return Buffer.from(`A\x01B,note`, 'latin1');
  }
}

interface Plan {
  sent: Map<string, { bad: number; good: string[] }>;
}

let root: string;
let broker: Broker;
let pty: PtyPair;
let store: BufferStore;
let intake: Intake;
let server: FastifyInstance;
const adapters: InputAdapter[] = [];
const clients: MqttClient[] = [];
const sockets: Socket[] = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'sg-bad-input-'));
  await chmod(root, 0o755); // the broker, dropped to its own user, must reach its folder inside
  broker = await startMosquitto(join(root, 'broker'));
  await mkdir(join(root, 'pty'));
  pty = await createPtyPair(join(root, 'pty'));
});

afterAll(async () => {
  for (const a of adapters.splice(0).reverse()) await a.stop().catch(() => undefined);
  for (const c of clients) await c.endAsync(true).catch(() => undefined);
  for (const s of sockets) s.destroy();
  await server?.close();
  intake?.close();
  store?.close();
  await pty?.kill();
  await broker?.stop();
  await rm(root, { recursive: true, force: true });
});

describe('malformed input through every adapter into the real buffer', () => {
  it(`records one rejection with a reason for each of >10,000 malformed inputs, stores every good read, and every adapter stays up (seed ${SEED})`, async () => {
    const yaml = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
dcps: [{ key: BAD, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }]
inputs:
  - { id: ser, type: serial, dcp: BAD, path: ${pty.devicePath}, maxReadLength: ${MAX_READ} }
  - { id: tcp, type: tcp, dcp: BAD, mode: server, host: 127.0.0.1, port: 0, maxReadLength: ${MAX_READ} }
  - { id: mq, type: mqtt, dcp: BAD, url: ${broker.url}, topics: [bad/#], clientId: bad-gw, format: json, maxPayloadBytes: 2048 }
  - { id: web, type: http, dcp: BAD, maxBodyBytes: 2048 }
  - { id: csv, type: files, dcp: BAD, dir: ${join(root, 'csv')}, format: csv, maxReadLength: ${MAX_READ}, stableMs: 100 }
  - { id: nd, type: files, dcp: BAD, dir: ${join(root, 'nd')}, format: ndjson, maxReadLength: ${MAX_READ}, stableMs: 100 }
`;
    const config: GatewayConfig = parseConfigText(yaml, 'bad-input.yaml');
    const input = <T extends BuiltInInputConfig['type']>(
      id: string,
      _type: T,
    ): Extract<BuiltInInputConfig, { type: T }> =>
      config.inputs.find((i) => i.id === id) as Extract<BuiltInInputConfig, { type: T }>;
    store = BufferStore.openAt(join(root, 'buffer.db'));
    intake = new Intake({ store, mapping: mappingContext(config), logger: silentLogger() });
    intake.open();
    const logger = silentLogger();
    const serial = new SerialInput({ config: input('ser', 'serial'), sink: intake, logger });
    const tcp = new TcpInput({ config: input('tcp', 'tcp'), sink: intake, logger });
    const mqtt = new MqttInput({ config: input('mq', 'mqtt'), sink: intake, logger });
    const http = new HttpIngestInput({
      config: input('web', 'http'),
      sink: intake,
      logger,
      env: { SCAN_GATEWAY_INGEST_TOKEN: TOKEN },
    });
    const csv = new FilesInput({ config: input('csv', 'files'), sink: intake, logger });
    const nd = new FilesInput({ config: input('nd', 'files'), sink: intake, logger });
    for (const a of [serial, tcp, mqtt, http, csv, nd]) {
      adapters.push(a);
      await a.start();
    }
    server = Fastify();
    await http.registerRoutes(server);
    // The TCP input listens with no reader yet: it waits for one (up once the test connects).
    await waitFor(
      () => adapters.every((a) => a.status().state === (a === tcp ? 'waiting for reader' : 'up')),
      { what: 'all adapters up' },
    );

    const plan: Plan = { sent: new Map() };
    const note = (id: string, bad: number, good: string[]): void => {
      const s = plan.sent.get(id) ?? { bad: 0, good: [] };
      s.bad += bad;
      s.good.push(...good);
      plan.sent.set(id, s);
    };
    /** `count` malformed items with a good one after every 10th, as one byte stream / list. */
    const mix = (
      id: string,
      count: number,
      bad: () => Buffer,
      good: (code: string) => Buffer,
    ): Buffer[] => {
      const out: Buffer[] = [];
      for (let i = 0; i < count; i++) {
        out.push(bad());
        if (i % 10 === 9) {
          const code = `GOOD-${id}-${i}`;
          out.push(good(code));
          note(id, 0, [code]);
        }
      }
      note(id, count, []);
      return out;
    };

    // Serial (pty) and TCP: CR-terminated frames.
    const serialFrames = mix('ser', 2000, badFrame, (c) => Buffer.from(c));
    const tcpFrames = mix('tcp', 3000, badFrame, (c) => Buffer.from(c));
    const socket = createConnection({ host: '127.0.0.1', port: tcp.address()!.port });
    sockets.push(socket);
    await new Promise((resolve) => socket.once('connect', resolve));
    const cr = Buffer.from('\r');
    socket.write(Buffer.concat(tcpFrames.flatMap((f) => [f, cr])));
    // Written in pieces of whole frames: the framer ends an overlong read at a pause of 200 ms, and a
    // pause between two writes (a busy machine) inside an overlong frame would make it two reads.
    let piece: Buffer[] = [];
    let pieceBytes = 0;
    for (const f of serialFrames) {
      piece.push(f, cr);
      pieceBytes += f.length + 1;
      if (pieceBytes >= 4096) {
        await pty.write(Buffer.concat(piece));
        piece = [];
        pieceBytes = 0;
      }
    }
    if (piece.length > 0) await pty.write(Buffer.concat(piece));

    // MQTT (JSON format): each payload one message.
    const payloads = mix(
      'mq',
      2000,
      () => badJson(2048),
      (c) => Buffer.from(JSON.stringify({ code: c })),
    );
    const pub = await connectAsync(broker.url, { clientId: 'bad-pub', protocolVersion: 5 });
    clients.push(pub);
    await Promise.all(payloads.map((p, i) => pub.publishAsync(`bad/${i % 7}`, p, { qos: 1 })));

    // HTTP ingest: each body one request, 100 at a time.
    const bodies = mix(
      'web',
      1500,
      () => badJson(2048),
      (c) => Buffer.from(JSON.stringify({ code: c })),
    );
    const statuses = new Map<number, number>();
    for (let i = 0; i < bodies.length; i += 100) {
      const answers = await Promise.all(
        bodies.slice(i, i + 100).map((body) =>
          server.inject({
            method: 'POST',
            url: INGEST_PATH,
            headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
            payload: body,
          }),
        ),
      );
      for (const a of answers) statuses.set(a.statusCode, (statuses.get(a.statusCode) ?? 0) + 1);
    }
    expect([...statuses.keys()].sort()).toEqual([202, 400, 413]);
    expect(statuses.get(202)).toBe(150);

    // Files: a CSV and an ndjson file of broken rows and lines, split over a few files each.
    const rows = mix('csv', 1000, badCsvRow, (c) => Buffer.from(`${c},note`));
    const lines = mix(
      'nd',
      1000,
      () => badJson(),
      (c) => Buffer.from(JSON.stringify({ code: c })),
    );
    for (let f = 0; f < 4; f++) {
      const part = rows.slice(f * 275, (f + 1) * 275);
      await writeFile(
        join(root, 'csv', `part-${f}.csv`),
        Buffer.concat([
          Buffer.from('barcode,note\r\n'),
          ...part.flatMap((r) => [r, Buffer.from('\r\n')]),
        ]),
      );
      await writeFile(
        join(root, 'nd', `part-${f}.ndjson`),
        Buffer.concat(lines.slice(f * 275, (f + 1) * 275).flatMap((l) => [l, Buffer.from('\n')])),
      );
    }
    // And a CSV that cannot be taken at all (broken quoting): to failed/ with the reason beside it.
    await writeFile(join(root, 'csv', 'broken-quotes.csv'), 'barcode,note\r\n"unterminated,x\r\n');

    const totalBad = [...plan.sent.values()].reduce((n, s) => n + s.bad, 0);
    expect(totalBad).toBeGreaterThanOrEqual(10_000);

    const count = (id: string, outcome: string): number =>
      sqlOf(store)
        .prepare(`SELECT count(*) FROM reads WHERE input_id = ? AND outcome = ?`)
        .pluck()
        .get(id, outcome) as number;
    // broken-quotes.csv, a file that cannot be taken, is counted too: one rejection of the csv input.
    const whole = (id: string) => (id === 'csv' ? 1 : 0);
    await waitFor(
      () =>
        [...plan.sent].every(
          ([id, s]) =>
            count(id, 'rejected') + count(id, 'scan') >= s.bad + whole(id) + s.good.length,
        ),
      {
        what: 'every input committed',
        timeoutMs: 40_000,
        intervalMs: 200,
      },
    );

    for (const [id, s] of plan.sent) {
      expect({ id, rejected: count(id, 'rejected'), scans: count(id, 'scan') }).toEqual({
        id,
        rejected: s.bad + whole(id),
        scans: s.good.length,
      });
      const stored = new Set(
        (
          sqlOf(store)
            .prepare(`SELECT raw FROM reads WHERE input_id = ? AND outcome = 'scan'`)
            .pluck()
            .all(id) as Buffer[]
        ).map(String),
      );
      expect(s.good.filter((c) => !stored.has(c))).toEqual([]);
    }
    const withoutReason = sqlOf(store)
      .prepare(
        `SELECT count(*) FROM reads WHERE outcome = 'rejected' AND (reason IS NULL OR reason = '')`,
      )
      .pluck()
      .get();
    expect(withoutReason).toBe(0);
    await waitFor(
      async () =>
        (await readdir(join(root, 'csv', 'failed')).catch((): string[] => [])).includes(
          'broken-quotes.csv.error.txt',
        ),
      { what: 'broken-quotes.csv in failed/' },
    );
    expect(
      await readFile(join(root, 'csv', 'failed', 'broken-quotes.csv.error.txt'), 'utf8'),
    ).toMatch(/CSV cannot be parsed/);
    for (const a of adapters)
      expect({ id: a.id, state: a.status().state }).toEqual({ id: a.id, state: 'up' });
  });
});
