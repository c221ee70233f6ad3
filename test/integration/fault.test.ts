import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Intake } from '../../src/intake/intake.js';
import { BufferStore } from '../../src/buffer/store.js';
import { configSchema } from '../../src/config/schema.js';
import { Deliverer } from '../../src/delivery/deliverer.js';
import type { IntakeItem } from '../../src/inputs/types.js';
import { silentLogger } from '../../src/log.js';
import { mappingContext } from '../../src/mapping/map-read.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { UpstreamClient } from '../../src/upstream/client.js';
import { waitFor } from '../helpers/wait.js';
import { sqlOf } from '../helpers/buffer-sql.js';

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();
const TOTAL = 100_000;
/** The first reads trickle in (direct batches, some refused with 413 and split); the rest come as one backlog (pre-signed). */
const TRICKLE = 20_000;

interface LoggedScan {
  requestId: string;
  via: 'direct' | 'presigned';
  scan: Record<string, unknown>;
}

/** Read number i as a scanner line would give it: code, source time, parents and attributes. */
function read(i: number): IntakeItem {
  const s = i % 86_400;
  const hh = String(Math.floor(s / 3600)).padStart(2, '0');
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, '0');
  const ss = String(s % 60).padStart(2, '0');
  return {
    kind: 'read',
    read: {
      inputId: 'line-1',
      raw: Buffer.from(`CELL-${String(i).padStart(6, '0')}`),
      receivedAt: new Date(),
      sourceTime: `2026-11-18T${hh}:${mm}:${ss}+01:00`,
      parents: [`TRAY-${Math.floor(i / 50)}`],
      attributes: { line: 'L1', seq: String(i) },
      origin: { file: 'fault-test', line: i },
    },
  };
}

/** What the service must receive for read i: worked out here from the read, not by the mapping. */
function expected(i: number): Record<string, unknown> {
  const item = read(i);
  if (item.kind !== 'read') throw new Error('unreachable');
  return {
    reference: item.read.raw.toString(),
    timeStamp: item.read.sourceTime!.slice(0, 19),
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    supplierKey: 'SUP-0042',
    parents: item.read.parents,
    attributes: [
      { key: 'line', value: 'L1' },
      { key: 'seq', value: String(i) },
    ],
  };
}

describe('fault test: 100,000 scans through an upstream that fails in every way it can', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, processingDelayMs: 50, maxLoggedScans: 1_000_000 });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it(
    'delivers every scan exactly as read; duplicates only where an answer was lost, and counted',
    { timeout: 180_000 },
    async () => {
      const started = Date.now();
      const dir = mkdtempSync(join(tmpdir(), 'sg-fault-'));
      const store = BufferStore.openAt(join(dir, 'buffer.db'));
      const config = configSchema.parse({
        site: { id: 'fault', timezone: 'Europe/Berlin' },
        upstream: { baseUrl: sandbox.url, authUrl: sandbox.url, clientId: 'demo-client' },
        buffer: { path: join(dir, 'buffer.db') },
        delivery: {
          mode: 'auto',
          maxBatchScans: 3000,
          maxBatchDelayMs: 50,
          presignedMaxScans: 10_000,
          retryBaseMs: 10,
          retryMaxMs: 200,
          statusPollMs: 50,
          statusPollMaxMs: 200,
          notFoundGraceMs: 300,
        },
        dcps: [
          {
            key: 'GI-01',
            kind: 'goodsIn',
            productModelKey: 'PACK-A',
            supplierKey: 'SUP-0042',
            duplicateWindowMs: 0,
          },
        ],
        inputs: [{ id: 'line-1', type: 'files', dir: join(dir, 'unused'), dcp: 'GI-01' }],
      });
      // 30% 5xx, 10% resets before the request is read, 5% of uploads processed but their answer
      // lost, 10% 429 with Retry-After 1 s, tokens valid 2 s, an auth server that answers 5xx to 20%
      // of token requests, drops 20% of them and answers 10% with cut-off JSON (a token failure is
      // never an upload: nothing may be held), and direct uploads over 60 KB (about 270 scans)
      // refused with 413: every direct batch of the trickle (500 or more) is split until it fits.
      const faults = {
        errorRate: 0.3,
        resetRate: 0.1,
        lostAnswerRate: 0.05,
        rateLimitRate: 0.1,
        retryAfterSec: 1,
        tokenTtlSec: 2,
        tokenErrorRate: 0.2,
        tokenResetRate: 0.2,
        tokenUnreadableRate: 0.1,
        directLimitBytes: 60_000,
      };
      // The auth server refuses every token until the client has met that once, then takes the mix
      // above: a failed token request is then part of every run, not a matter of chance (with tokens
      // of 2 s a fast run makes only five or six token requests).
      sandbox.setFaults({
        ...faults,
        tokenErrorRate: 1,
        tokenResetRate: 0,
        tokenUnreadableRate: 0,
      });
      const client = new UpstreamClient({
        baseUrl: sandbox.url,
        authUrl: sandbox.url,
        clientId: 'demo-client',
        clientSecret: SECRET,
        requestTimeoutMs: 10_000,
      });
      const deliverer = new Deliverer({
        store,
        api: client,
        config: config.delivery,
        logger: silentLogger(),
      });
      const intake = new Intake({
        store,
        mapping: mappingContext(config),
        logger: silentLogger(),
        onScansCommitted: () => deliverer.wake(),
      });
      intake.open();
      deliverer.start();
      try {
        for (let i = 0; i < TRICKLE; i += 500) {
          await intake.submit(Array.from({ length: 500 }, (_, j) => read(i + j)));
          await new Promise((resolve) => setTimeout(resolve, 40));
          if (i === 0) {
            await waitFor(
              async () => {
                const r = (await (await fetch(`${sandbox.url}/_sandbox/requests`)).json()) as {
                  requests: { status: number; path: string }[];
                };
                return r.requests.some((q) => q.path === '/oauth2/token' && q.status >= 500);
              },
              {
                timeoutMs: 30_000,
                intervalMs: 50,
                what: 'a token request refused by the auth server',
              },
            );
            sandbox.setFaults(faults);
          }
        }
        const burst: Promise<unknown>[] = [];
        for (let i = TRICKLE; i < TOTAL; i += 1000)
          burst.push(intake.submit(Array.from({ length: 1000 }, (_, j) => read(i + j))));
        await Promise.all(burst);
        const fedAt = Date.now();

        await waitFor(() => store.reports.totals().undeliveredScans === 0, {
          timeoutMs: 150_000,
          intervalMs: 250,
          what: 'every scan delivered',
        });
        expect(store.reports.scanCounts()).toEqual({ delivered: TOTAL });
        const deliveredAt = Date.now();

        const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
          count: number;
          dropped: number;
          scans: LoggedScan[];
        };
        expect(log.dropped).toBe(0);
        const byReference = new Map<string, LoggedScan[]>();
        for (const s of log.scans) {
          const ref = String(s.scan.reference);
          byReference.set(ref, [...(byReference.get(ref) ?? []), s]);
        }
        // Every scan arrived, with exactly the content of its read, and byte for byte what was stored.
        expect(byReference.size).toBe(TOTAL);
        const stored = new Map(
          (
            sqlOf(store).prepare(`SELECT reference, body FROM scans`).all() as {
              reference: string;
              body: string;
            }[]
          ).map((r) => [r.reference, r.body]),
        );
        for (let i = 0; i < TOTAL; i++) {
          const want = expected(i);
          const got = byReference.get(want.reference as string);
          expect(got, `scan ${want.reference as string}`).toBeDefined();
          for (const g of got!) {
            expect(g.scan).toEqual(want);
            expect(JSON.stringify(g.scan)).toBe(stored.get(want.reference as string));
          }
        }
        // Extra copies only from direct uploads whose answer was lost, and no more than counted.
        const duplicates = log.scans.length - TOTAL;
        const dup = deliverer.snapshot();
        expect(duplicates).toBeLessThanOrEqual(dup.possibleDuplicatesTotal);
        for (const [ref, copies] of byReference) {
          if (copies.length > 1)
            expect(
              copies.every((c) => c.via === 'direct'),
              `duplicate of ${ref} came pre-signed`,
            ).toBe(true);
        }
        const batches = sqlOf(store)
          .prepare(
            `SELECT mode, count(*) AS n, sum(scan_count) AS scans FROM batches GROUP BY mode`,
          )
          .all() as {
          mode: string;
          n: number;
          scans: number;
        }[];
        const requests = (await (await fetch(`${sandbox.url}/_sandbox/requests`)).json()) as {
          requests: { status: number; path: string }[];
        };
        const statuses = new Map<number, number>();
        for (const r of requests.requests)
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        // Each kind of fault was met (the request log keeps the last 10,000 requests at most).
        for (const status of [0, 413, 429, 500, 503])
          expect(statuses.get(status) ?? 0, `HTTP ${status} seen`).toBeGreaterThan(0);
        // The auth server failed too (5xx or dropped: about 2 in 5 token requests), and every scan still arrived.
        const tokenFailures = requests.requests.filter(
          (r) => r.path === '/oauth2/token' && (r.status === 0 || r.status >= 500),
        ).length;
        expect(tokenFailures, 'failed token requests').toBeGreaterThan(0);
        // Tokens lived 2 s and the run lasts longer: the client obtained new ones (renewing ahead of
        // expiry, or after a 401). How many depends on how long delivery waited in backoff, which a
        // busy machine stretches, so the count is not compared with the run's duration.
        const tokens = client.tokenInfo().refreshes;
        expect(deliveredAt - started).toBeGreaterThan(2_000);
        expect(tokens).toBeGreaterThan(1);
        expect(batches.find((b) => b.mode === 'presigned')?.scans ?? 0).toBeGreaterThan(0);
        expect(batches.find((b) => b.mode === 'direct')?.scans ?? 0).toBeGreaterThan(0);

        console.log(
          `fault test: ${TOTAL} scans fed in ${((fedAt - started) / 1000).toFixed(1)} s, all delivered after ${((deliveredAt - started) / 1000).toFixed(1)} s; ` +
            `batches ${JSON.stringify(batches)}; sandbox received ${log.scans.length} (${duplicates} duplicates, ${dup.possibleDuplicatesTotal} counted as possible ` +
            `in ${dup.possibleDuplicateUploads} uploads); ${tokens} tokens; answers seen ${JSON.stringify(Object.fromEntries(statuses))}`,
        );
      } finally {
        intake.close();
        await deliverer.stop();
        await client.close();
        store.close();
      }
    },
  );
});
