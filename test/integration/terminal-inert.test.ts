import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { BufferReader } from '../../src/queries/reader.js';
import { parseConfigText } from '../../src/config/load.js';
import { ErrorCodes, GatewayError } from '../../src/errors.js';
import { INGEST_PATH } from '../../src/inputs/http/ingest-routes.js';
import { silentLogger } from '../../src/log.js';
import { MAIN_JS } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * What the CLI prints of stored data cannot act on plant IT's terminal: an ingest client posts
 * escape sequences (a title change, colours, BEL, a CSI in its C1 form) and bidirectional
 * overrides in references, parents, attributes and DCP names, the upstream answers with one in
 * its error, and the compiled `trace`, `failures`, `queue` and `replay --dry-run` print them as
 * `<ESC>`, `\u202e`…, in their human and their JSON output; the JSON still parses to the stored
 * values.
 */

const TOKEN = 'inert-test-token-1234567890';
const ESCAPES = '\u001b]0;PWNED\u0007\u001b[31mRED\u009b2J';
const REFERENCE = 'CELL-\u202eLTR-\u2066X';
const PARENT = `MOD-${ESCAPES}`;
const NOTE = `A${ESCAPES}\u202e`;
const UPSTREAM_ERROR = `refused\u001b[5m\u202eevil`;

/** Any byte or character that acts on a terminal or on how the text reads; line feeds aside. */
const ACTIVE =
  // eslint-disable-next-line no-control-regex -- exactly what must not reach the terminal
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

let dir: string;
let buffer: string;
let app: App;

function cli(args: string[]): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  const child = spawn(process.execPath, [MAIN_JS, ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => out.push(d));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) =>
    child.once('exit', (code) => resolve({ code, stdout: Buffer.concat(out), stderr })),
  );
}

/** The output is inert byte for byte: no ESC, BEL, C1 (as UTF-8 C2 80–9F), no bidi character. */
function expectInert(bytes: Buffer, what: string): string {
  expect(bytes.includes(0x1b), `${what}: ESC`).toBe(false);
  expect(bytes.includes(0x07), `${what}: BEL`).toBe(false);
  const text = bytes.toString('utf8');
  expect(ACTIVE.exec(text)?.[0], what).toBeUndefined();
  return text;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sg-inert-'));
  buffer = join(dir, 'gw.db');
  const file = join(dir, 'config.yaml');
  const yaml = `site: { id: t, timezone: Europe/Berlin }
upstream: { baseUrl: http://127.0.0.1:9, authUrl: http://127.0.0.1:9, clientId: c }
buffer: { path: ${buffer} }
http: { listen: 127.0.0.1:0 }
delivery: { maxBatchDelayMs: 0, retryBaseMs: 60000, retryMaxMs: 60000 }
dcps:
  - { key: MES-1, kind: startOfProcess, productModelKey: PACK-A, duplicateWindowMs: 0 }
inputs:
  - { id: mes, type: http, dcp: MES-1 }
`;
  await writeFile(file, yaml);
  const api = {
    uploadScans: async () => {
      throw new GatewayError(ErrorCodes.UPSTREAM_HTTP, UPSTREAM_ERROR, {
        retryable: true,
        details: { status: 503 },
      });
    },
    requestPresignedUpload: async () => ({ url: 'http://127.0.0.1:9/x', requestId: 'r-2' }),
    putPresigned: async () => undefined,
    getScanStatus: async (requestId: string) => ({ state: 'Success', requestId }),
  };
  app = buildApp(
    { file, config: parseConfigText(yaml, file), clientSecret: 'x' },
    { logger: silentLogger(), api, env: { SCAN_GATEWAY_INGEST_TOKEN: TOKEN } },
  );
  await app.start();
  const res = await fetch(`${app.httpUrl}${INGEST_PATH}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify([
      { code: REFERENCE, parents: PARENT, attributes: { note: NOTE, [`k${ESCAPES}`]: 'v' } },
      { code: `BAD-${ESCAPES}`, dcp: `NO-DCP-${ESCAPES}\u202e` },
    ]),
  });
  expect(res.status).toBe(202);
  // The upload failed once with the hostile error: the batch holds it as its last error.
  await waitFor(
    () => {
      const reader = new BufferReader(buffer);
      try {
        return reader.reports.queue(Date.now()).batches.some((b) => b.lastError?.includes('evil'));
      } finally {
        reader.close();
      }
    },
    { timeoutMs: 20_000, what: 'the upload refused with the hostile error' },
  );
  await app.stop();
}, 60_000);

afterAll(async () => {
  await app?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('the CLI prints stored data inert', () => {
  it('trace: reference, parents, attributes and the read, human and JSON', async () => {
    const human = await cli(['trace', REFERENCE, '--buffer', buffer]);
    expect(human.code, human.stderr).toBe(0);
    const text = expectInert(human.stdout, 'trace');
    expect(text).toContain('CELL-\\u202eLTR-\\u2066X');
    expect(text).toContain('MOD-<ESC>]0;PWNED<BEL><ESC>[31mRED\\u009b2J');
    expect(text).toContain('note=A<ESC>]0;PWNED');
    expect(text).toContain('k<ESC>]0;PWNED');

    const json = await cli(['trace', REFERENCE, '--buffer', buffer, '--json']);
    const parsed = JSON.parse(expectInert(json.stdout, 'trace --json')) as {
      reference: string;
      scans: { parents: string[]; attributes: { key: string; value: string }[] }[];
    };
    expect(parsed.reference).toBe(REFERENCE);
    expect(parsed.scans[0]!.parents).toEqual([PARENT]);
    expect(parsed.scans[0]!.attributes).toContainEqual({ key: 'note', value: NOTE });
  });

  it('trace of the hostile parent: the children tree', async () => {
    const run = await cli(['trace', PARENT, '--buffer', buffer]);
    const text = expectInert(run.stdout, 'trace parent');
    expect(text).toContain('CELL-\\u202eLTR-\\u2066X');
  });

  it('failures: the rejected read and its reason', async () => {
    const human = await cli(['failures', '--buffer', buffer]);
    expect(human.code, human.stderr).toBe(0);
    const text = expectInert(human.stdout, 'failures');
    expect(text).toContain('NO-DCP-<ESC>]0;PWNED');
    const json = await cli(['failures', '--buffer', buffer, '--json']);
    expectInert(json.stdout, 'failures --json');
  });

  it("queue: the upstream's error on the batch", async () => {
    const human = await cli(['queue', '--buffer', buffer]);
    expect(human.code, human.stderr).toBe(0);
    const text = expectInert(human.stdout, 'queue');
    expect(text).toContain('refused<ESC>[5m\\u202eevil');
    const json = await cli(['queue', '--buffer', buffer, '--json']);
    const parsed = JSON.parse(expectInert(json.stdout, 'queue --json')) as {
      batches: { lastError: string }[];
    };
    expect(parsed.batches[0]!.lastError).toContain(UPSTREAM_ERROR);
  });

  it('try: the payload as the mapping sees it, human and JSON', async () => {
    const payload = JSON.stringify({
      code: REFERENCE,
      parents: PARENT,
      attributes: { note: NOTE },
    });
    for (const json of [[], ['--json']]) {
      const run = await cli([
        'try',
        '--config',
        join(dir, 'config.yaml'),
        '--input',
        'mes',
        '--payload',
        payload,
        ...json,
      ]);
      expect(run.code, run.stderr).toBe(0);
      const text = expectInert(run.stdout, `try ${json.join('')}`);
      expect(text).toContain('\\u202e');
    }
  });
});
