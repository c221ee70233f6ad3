import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { freePort } from '../helpers/ports.js';
import { createPtyScanner, type PtyScanner } from '../helpers/pty-scanner.js';
import { runTry } from '../helpers/try-cli.js';
import { waitFor } from '../helpers/wait.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

const ACK = '\x06';
const NAK = '\x15';
/**
 * The distinct NAK of a cell scanned with no module open (`nakBytesByReason.noContainer`); one
 * byte, as each answer is, so a scan's answer is complete with its first byte.
 */
const NAK_NO_MODULE = '\x07';
/** GS1 DataMatrix cells: GTIN 04012345678901 (check digit 1) and a serial. */
const cell = (serial: string) => `]d20104012345678901${'21'}${serial}`;
/** The same GTIN with a wrong check digit (4 instead of 1). */
const WRONG_CHECK_DIGIT = ']d20104012345678904' + '21CELL-X';

interface InputStatus {
  id: string;
  name?: string;
  state: string;
  readers?: { count: number; expected: number; connected: { address: string }[] };
}

/**
 * The station loop on the wire, with `ackOn: verdict`: a fixed-mount reader connecting to a TCP
 * server input (STX code CR LF) and a handheld on a real pty (code CR), each at its own station
 * with modules holding cells. Every answer byte is read where the scanner would read it.
 */
describe('the verdict goes back to the scanner (real pty, real TCP socket)', () => {
  let sandbox: RunningSandbox;
  let app: App;
  let tcpPort: number;
  let handheld: PtyScanner;
  let reader: Socket | undefined;
  let file: string;

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 20 });
    tcpPort = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'sg-verdict-'));
    handheld = await createPtyScanner(dir);
    file = join(dir, 'config.yaml');
    writeFileSync(
      file,
      `site: { id: cell-to-module, timezone: Europe/Berlin }
upstream: { baseUrl: ${sandbox.url}, authUrl: ${sandbox.url}, clientId: demo-client }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 20, statusPollMs: 30, statusPollMaxMs: 60 }
http: { listen: 127.0.0.1:0 }
dcps:
  - { key: ST-10, kind: endOfProcess, productModelKey: MOD-A }
  - { key: ST-20, kind: endOfProcess, productModelKey: MOD-A }
inputs:
  - id: st10
    name: ST-10 cell reader
    type: tcp
    mode: server
    host: 127.0.0.1
    port: ${tcpPort}
    dcp: ST-10
    framing: stxEtx
    etx: "\\r"
    ackOn: verdict
    ackBytes: "\\x06"
    nakBytes: "\\x15"
    nakBytesByReason: { noContainer: "\\x07" }
    expectReaders: 1
  - id: st20
    type: serial
    path: ${handheld.devicePath}
    dcp: ST-20
    ackOn: verdict
    ackBytes: "\\x06"
    nakBytes: "\\x15"
    nakBytesByReason: { noContainer: "\\x07" }
containers:
  - { name: module, open: { regex: "^MOD-" }, members: 12 }
rules:
  - { name: modules, match: { regex: "^MOD-" } }
  - { name: cells, match: { gs1: true }, requireContainer: module }
`,
    );
    app = buildApp(
      loadConfig(file, { baseDir: dir, env: { SCAN_GATEWAY_CLIENT_SECRET: SECRET } }),
      { logger: silentLogger() },
    );
    await app.start();
  });
  afterAll(async () => {
    reader?.destroy();
    await app?.stop();
    await handheld?.kill();
    await sandbox?.close();
  });

  const inputStatus = async (id: string): Promise<InputStatus> => {
    const status = (await (await fetch(`${app.httpUrl}/api/v1/status`)).json()) as {
      inputs: InputStatus[];
    };
    return status.inputs.find((i) => i.id === id)!;
  };

  /**
   * Scans one code after another, as a person does: each waits for its answer before the next.
   * Answers the bytes each scan got.
   */
  async function scanAll(
    send: (frame: string) => void,
    received: () => string,
    frames: string[],
  ): Promise<string[]> {
    const answers: string[] = [];
    for (const frame of frames) {
      const before = received().length;
      send(frame);
      await waitFor(() => received().length > before, {
        what: `the answer to ${JSON.stringify(frame)}`,
      });
      answers.push(received().slice(before));
    }
    return answers;
  }

  /** The twelve cells of one module. */
  const CELLS = Array.from({ length: 12 }, (_, i) => cell(`C-${String(i + 1).padStart(2, '0')}`));
  const SEQUENCE = [
    cell('NOMOD-1'),
    'MOD-L2-000124',
    ...CELLS,
    // The module closed by itself with its 12th cell: a 13th has no module to join.
    cell('C-13'),
    WRONG_CHECK_DIGIT,
  ];
  /** The answers to SEQUENCE and an empty frame, in order. */
  const EXPECTED = [NAK_NO_MODULE, ACK, ...CELLS.map(() => ACK), NAK, NAK, NAK];

  /** The open containers at a station now (`/api/v1/status`, `sessions`). */
  const openAt = async (station: string): Promise<{ parent: string }[]> => {
    const status = (await (await fetch(`${app.httpUrl}/api/v1/status`)).json()) as {
      sessions: { station: string; parent: string }[];
    };
    return status.sessions.filter((s) => s.station === station);
  };

  it('a TCP server input with no reader is waiting, and up once the reader connects', async () => {
    expect(await inputStatus('st10')).toMatchObject({
      name: 'ST-10 cell reader',
      state: 'waiting for reader',
      readers: { count: 0, expected: 1, connected: [] },
    });
    const health = (await (await fetch(`${app.httpUrl}/healthz`)).json()) as {
      inputs?: { id: string; state: string }[];
      problems: { code: string }[];
    };
    // expectReaders: 1 makes the missing reader a problem with its code.
    expect(health.problems.map((p) => p.code)).toContain('SCANGW_H_INPUT_NO_READER');
    expect(health.inputs?.find((i) => i.id === 'st10')?.state).toBe('waiting for reader');
    const metrics = await (await fetch(`${app.httpUrl}/metrics`)).text();
    expect(metrics).toContain('scan_gateway_input_up{input="st10",type="tcp"} 0');

    reader = createConnection({ host: '127.0.0.1', port: tcpPort });
    await new Promise((resolve) => reader!.once('connect', resolve));
    await waitFor(async () => (await inputStatus('st10')).state === 'up', {
      what: 'st10 up once its reader connected',
    });
    const status = await inputStatus('st10');
    const after = (await (await fetch(`${app.httpUrl}/healthz`)).json()) as {
      problems: { code: string }[];
    };
    expect(after.problems.map((p) => p.code)).not.toContain('SCANGW_H_INPUT_NO_READER');
    expect(status.readers).toMatchObject({
      count: 1,
      connected: [{ address: `127.0.0.1:${reader.localPort}` }],
    });
  });

  it('TCP (STX code CR LF): NAK with no module open, ACK for the module and its 12 cells, the module closed by itself, NAK for a 13th cell, a wrong check digit and an empty frame', async () => {
    expect(reader).toBeDefined();
    let wire = '';
    reader!.on('data', (chunk: Buffer) => (wire += chunk.toString('latin1')));
    const answers = await scanAll(
      (code) => reader!.write(code === '' ? '\x02\r\n' : `\x02${code}\r\n`),
      () => wire,
      [...SEQUENCE, ''],
    );
    expect(answers).toEqual(EXPECTED);
    expect(wire).toBe(EXPECTED.join(''));
    // members: 12 closed MOD-L2-000124 by itself: nothing is open at ST-10 any more.
    expect(await openAt('ST-10')).toEqual([]);
  });

  it('serial (code CR) on a real pty: the same verdicts, bytes as the scanner reads them', async () => {
    const answers = await scanAll(
      (code) => handheld.write(`${code}\r`),
      () => handheld.received().toString('latin1'),
      [...SEQUENCE, ''],
    );
    expect(answers).toEqual(EXPECTED);
    expect(handheld.received().toString('latin1')).toBe(EXPECTED.join(''));
    expect(await openAt('ST-20')).toEqual([]);
  });

  it('try --payload frames the bytes as the live input does, several reads in one payload', async () => {
    const outcomes = async (input: string, payload: string) => {
      const { out } = await runTry(file, Date.now(), [
        '--input',
        input,
        '--json',
        '--payload',
        payload,
      ]);
      // The refusal's code, as the live input picks its NAK (`nakBytesByReason.noContainer`).
      return (JSON.parse(out) as { outcome: string; code?: string }[]).map((r) =>
        r.outcome === 'scan' ? ACK : r.code === 'noContainer' ? NAK_NO_MODULE : NAK,
      );
    };
    const live = EXPECTED;
    // ST-10 sends STX code CR LF; typed with the escapes `failures` prints.
    const tcp = [...SEQUENCE, ''].map((code) => `<STX>${code}<CR>\\x0a`).join('');
    expect(await outcomes('st10', tcp)).toEqual(live);
    const serial = [...SEQUENCE, ''].map((code) => `${code}\\x0d`).join('');
    expect(await outcomes('st20', serial)).toEqual(live);
    const empty = await runTry(file, Date.now(), [
      '--input',
      'st10',
      '--json',
      '--payload',
      '\\x02<CR><LF>',
    ]);
    expect(JSON.parse(empty.out)).toMatchObject([
      {
        outcome: 'rejected',
        reason: 'the input refuses it: empty read: nothing between STX and ETX',
      },
    ]);
  });

  it('counts the empty frames as rejections of their inputs', async () => {
    const status = (await (await fetch(`${app.httpUrl}/api/v1/status`)).json()) as {
      inputs: { id: string; counters: { rejections: number; scans: number } }[];
    };
    const counters = (id: string) => status.inputs.find((i) => i.id === id)!.counters;
    // The cell with no module, the 13th cell, the wrong check digit and the empty frame; the module
    // and its 12 cells are scans.
    for (const id of ['st10', 'st20'])
      expect(counters(id)).toMatchObject({ rejections: 4, scans: 13 });
  });

  it('shows the input by its name on the page and on the station screen', async () => {
    const page = await (await fetch(`${app.httpUrl}/`)).text();
    expect(page).toContain('<strong>ST-10 cell reader</strong> <span class="muted">st10</span>');
    const screen = await (await fetch(`${app.httpUrl}/station/ST-10`)).text();
    expect(screen).toMatch(/<div class="meta">[^<]* · ST-10 cell reader/);
    // An input without a name is shown by its id.
    const other = await (await fetch(`${app.httpUrl}/station/ST-20`)).text();
    expect(other).toMatch(/<div class="meta">[^<]* · st20/);
  });
});
