import { mkdtempSync, readFileSync } from 'node:fs';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema } from '../../src/config/schema.js';
import { Deliverer } from '../../src/delivery/deliverer.js';
import { silentLogger } from '../../src/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { UpstreamClient } from '../../src/upstream/client.js';
import { waitFor } from '../helpers/wait.js';
import { sandboxRefs } from '../helpers/sandbox-scans.js';

/**
 * Recovery of a pre-signed PUT whose answer never came (docs/delivery.md, "Pre-signed recovery"):
 * real sandbox over HTTP, which keeps the single-use rule of an address (contract §4.4, §8: a used
 * address gets 403), a real SQLite buffer and real timers. Between the gateway and the sandbox sits
 * a small HTTP front that cuts a PUT after its whole body was received, before the sandbox sees it
 * (the batch never arrived), and can make the status endpoint show an upload late (it answers
 * NotFound for a while), as a service may. A cut after the sandbox stored the batch is the sandbox's
 * own fault `lostAnswerRate`.
 *
 * The grace (`notFoundGraceMs`) is set to 10 minutes and every batch must be accepted within a wait
 * of one minute: a second PUT to the same address waits a retry backoff step, never the grace. The
 * gap is wide enough that no slow machine turns one into the other; the times are printed.
 */

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const GRACE_MS = 600_000;
const SCANS = 50;

function scan(reference: string): IntakeRecord {
  const body = {
    reference,
    timeStamp: '2026-11-18T07:00:00',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    supplierKey: 'SUP-0042',
    parents: [],
    attributes: [],
  };
  return {
    inputId: 'test',
    receivedAt: new Date(),
    raw: Buffer.from(reference),
    outcome: 'scan',
    scan: { reference, dcpKey: 'GI-01', instant: new Date(), body: JSON.stringify(body) },
  };
}

/** What the front did with one pre-signed PUT. */
interface PutSeen {
  path: string;
  at: number;
  outcome: 'cut' | 'forwarded';
  status?: number;
}

/** An HTTP front of the sandbox: forwards everything, except what a test asks it to cut or hide. */
class Front {
  readonly server: Server;
  /** PUTs still to cut after their body was read, before forwarding (the batch never arrives). */
  cutBeforeStore = 0;
  /**
   * Every status check answers NotFound until this many PUTs have come (0: never hidden): a
   * service that shows an upload late, as long as the gateway takes to try again.
   */
  hideStatusUntilPuts = 0;
  /** PUTs come so far, cut or forwarded. */
  private putsCome = 0;
  readonly puts: PutSeen[] = [];
  addresses = 0;

  constructor(private readonly target: URL) {
    // A connection the gateway dropped (its deadline) ends the request here: nothing to answer.
    this.server = createServer(
      (req, res) => void this.handle(req, res).catch(() => req.socket.destroy()),
    );
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const path = req.url ?? '/';
    if (req.method === 'PUT' && path.startsWith('/_presigned/')) {
      this.putsCome++;
      if (this.cutBeforeStore > 0) {
        this.cutBeforeStore--;
        this.puts.push({ path, at: Date.now(), outcome: 'cut' });
        // The whole body was received; the connection dies before anything is stored or answered.
        req.socket.destroy();
        return;
      }
    }
    const status = /^\/api\/trace\/v3\/scans\/(\d+)\/status$/.exec(path);
    if (req.method === 'GET' && status && this.putsCome < this.hideStatusUntilPuts) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          state: 'NotFound',
          requestId: Number(status[1]),
          description: `No batch with request id ${status[1]}`,
          processed: 0,
        }),
      );
      return;
    }
    if (req.method === 'POST' && path === '/api/trace/v3/scans/preSignedUrl') this.addresses++;
    const headers = { ...req.headers };
    delete headers.connection;
    const upstream = httpRequest(
      {
        host: this.target.hostname,
        port: this.target.port,
        method: req.method,
        path,
        headers,
        agent: false,
      },
      (answer) => {
        const parts: Buffer[] = [];
        answer.on('data', (c: Buffer) => parts.push(c));
        answer.on('end', () => {
          if (req.method === 'PUT')
            this.puts.push({
              path,
              at: Date.now(),
              outcome: 'forwarded',
              status: answer.statusCode ?? 0,
            });
          const back = { ...answer.headers };
          delete back.connection;
          delete back['transfer-encoding'];
          res.writeHead(answer.statusCode ?? 502, back);
          res.end(Buffer.concat(parts));
        });
      },
    );
    // The sandbox dropped the connection (its `lostAnswerRate`): so does the front.
    upstream.on('error', () => {
      if (req.method === 'PUT')
        this.puts.push({ path, at: Date.now(), outcome: 'forwarded', status: 0 });
      req.socket.destroy();
    });
    upstream.end(body);
  }
}

describe('pre-signed recovery: a PUT cut after sending is retried to the same single-use address on the backoff, not after the grace', () => {
  let sandbox: RunningSandbox;
  let front: Front;
  let store: BufferStore;
  let client: UpstreamClient;
  let deliverer: Deliverer | undefined;

  beforeEach(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 50 });
    front = new Front(new URL(sandbox.url));
    await front.listen();
    store = BufferStore.openAt(
      join(mkdtempSync(join(tmpdir(), 'sg-presigned-recovery-')), 'buffer.db'),
    );
    client = new UpstreamClient({
      baseUrl: front.url,
      authUrl: front.url,
      clientId: 'demo-client',
      clientSecret: SECRET,
      requestTimeoutMs: 10_000,
    });
  });
  afterEach(async () => {
    await deliverer?.stop();
    deliverer = undefined;
    await client.close();
    store.close();
    await front.close();
    await sandbox.close();
  });

  /** Commits one batch of scans, starts delivery (small backoff, a 10 min grace) and waits until the service processed it; answers ms taken. */
  async function deliverOneBatch(prefix: string): Promise<number> {
    store.intake.commitIntake(
      Array.from({ length: SCANS }, (_, i) => scan(`${prefix}-${i}`)),
      Date.now(),
    );
    const started = Date.now();
    deliverer = new Deliverer({
      store,
      api: client,
      config: deliverySchema.parse({
        mode: 'presigned',
        maxBatchDelayMs: 0,
        presignedMaxScans: SCANS,
        retryBaseMs: 200,
        retryMaxMs: 2000,
        statusPollMs: 100,
        statusPollMaxMs: 400,
        notFoundGraceMs: GRACE_MS,
      }),
      logger: silentLogger(),
    });
    deliverer.start();
    await waitFor(() => store.batches.batchesInState('done').length === 1, {
      timeoutMs: 60_000,
      intervalMs: 20,
      what: 'the batch processed',
    });
    return Date.now() - started;
  }

  /** The sandbox holds every scan exactly once, the batch ended Success, nothing was counted as a possible duplicate. */
  async function expectExactlyOnce(prefix: string): Promise<void> {
    const refs = await sandboxRefs(sandbox);
    expect(refs.sort()).toEqual(Array.from({ length: SCANS }, (_, i) => `${prefix}-${i}`).sort());
    expect(store.batches.batchesInState('done')[0]).toMatchObject({
      upstreamState: 'Success',
      processed: SCANS,
    });
    expect(store.reports.scanCounts()).toEqual({ delivered: SCANS });
    expect(deliverer!.snapshot()).toMatchObject({
      possibleDuplicates: 0,
      possibleDuplicateUploads: 0,
    });
  }

  it(
    'the first PUT never arrived (cut twice before it was stored): the same address takes the third PUT, 0 doubled',
    { timeout: 120_000 },
    async () => {
      front.cutBeforeStore = 2;
      const ms = await deliverOneBatch('B');
      await expectExactlyOnce('B');
      // One address, one requestId: every PUT went to it; the sandbox saw only the one that came through.
      expect(front.addresses).toBe(1);
      expect(front.puts.map((p) => p.outcome)).toEqual(['cut', 'cut', 'forwarded']);
      expect(new Set(front.puts.map((p) => p.path)).size).toBe(1);
      expect(front.puts[2]!.status).toBe(200);
      // Two backoff steps (at most 200 and 400 ms), not the grace.
      expect(ms).toBeLessThan(GRACE_MS);
      console.log(
        `pre-signed recovery, cut before stored ×2: accepted after ${ms} ms; PUTs ${front.puts.map((p) => `+${p.at - front.puts[0]!.at} ms ${p.outcome}`).join(', ')}`,
      );
    },
  );

  it(
    'the first PUT arrived but its answer was lost, and the service shows it late: the second PUT is refused (403), its status followed to Success, 0 doubled',
    { timeout: 120_000 },
    async () => {
      // The sandbox stores the PUT, then drops the connection (and would for every PUT it takes).
      sandbox.setFaults({ lostAnswerRate: 1 });
      // The status says NotFound until the second PUT has come, however late the retry.
      front.hideStatusUntilPuts = 2;
      const ms = await deliverOneBatch('A');
      await expectExactlyOnce('A');
      expect(front.addresses).toBe(1);
      expect(front.puts.map((p) => p.status)).toEqual([0, 403]);
      expect(new Set(front.puts.map((p) => p.path)).size).toBe(1);
      expect(ms).toBeLessThan(GRACE_MS);
      console.log(
        `pre-signed recovery, stored then cut, shown late: accepted after ${ms} ms; PUTs ${front.puts.map((p) => `+${p.at - front.puts[0]!.at} ms ${p.status}`).join(', ')}`,
      );
    },
  );

  it(
    'the first PUT arrived but its answer was lost, and the service shows it at once: no second PUT at all',
    { timeout: 120_000 },
    async () => {
      sandbox.setFaults({ lostAnswerRate: 1 });
      const ms = await deliverOneBatch('C');
      await expectExactlyOnce('C');
      expect(front.puts.map((p) => p.status)).toEqual([0]);
      expect(ms).toBeLessThan(GRACE_MS);
    },
  );
});
