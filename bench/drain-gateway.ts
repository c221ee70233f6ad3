import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BufferStore } from '../src/buffer/store.js';
import { deliverySchema, type DeliveryConfig } from '../src/config/schema.js';
import { Deliverer } from '../src/delivery/deliverer.js';
import type { DeliveryApi } from '../src/delivery/types.js';
import { silentLogger } from '../src/log.js';
import { PACKAGE_ROOT } from '../src/paths.js';
import { UpstreamClient } from '../src/upstream/client.js';
import { reply } from './lib/child.js';
import { sqlOf } from '../test/helpers/buffer-sql.js';

/** The demo client's secret file (DEMO_SECRET_FILE of @scan-gateway/sandbox), not imported so fastify stays unloaded. */
const DEMO_SECRET_FILE = 'config/demo-client-secret';

/**
 * The gateway side of the drain and batch-fill benchmarks, in a process of its own so that its
 * memory is its own: the real `BufferStore`, `Deliverer` and `UpstreamClient` deliver the backlog of
 * `dbPath` to the sandbox at `sandboxUrl`. Answers one JSON line with the times at which every scan
 * was uploaded and confirmed, the peak RSS (VmHWM) and where the time went.
 *
 * Argument: JSON `{ dbPath, sandboxUrl, delivery, expectScans, timeoutMs }`.
 */

/** What the parent asks for (argv[2], JSON). */
export interface DrainRequest {
  dbPath: string;
  sandboxUrl: string;
  delivery: Partial<DeliveryConfig>;
  expectScans: number;
  timeoutMs: number;
}

/** The one JSON line answered on stdout. Times in ms, memory in MiB. */
export interface DrainAnswer {
  ok: boolean;
  error?: string;
  /** From `Deliverer.start()` until every scan was in an uploaded batch, in ms. */
  uploadedMs: number;
  /** Until every scan was confirmed processed (state delivered), in ms. */
  confirmedMs: number;
  peakRssMiB: number;
  rssAtStartMiB: number;
  /** Largest V8 heap (total committed) and external memory (Buffers) seen in 20 ms samples, in MiB. */
  peakHeapTotalMiB: number;
  peakExternalMiB: number;
  cpuSec: number;
  /** Time spent waiting for HTTP answers, per operation, in ms. */
  httpMs: Record<string, number>;
  /** Time spent in the store's batch forming and body reading, in ms. */
  storeMs: Record<string, number>;
  batches: number;
}

const request = JSON.parse(process.argv[2] ?? '{}') as DrainRequest;

function vmHwmMiB(): number {
  const text = readFileSync('/proc/self/status', 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(text)?.[1] ?? NaN) / 1024;
}

/** Wraps each method so its time is added to `sink[name]`; calls go through unchanged. */
function timed<T extends object>(target: T, names: string[], sink: Record<string, number>): void {
  for (const name of names) {
    const original = (target as Record<string, unknown>)[name] as (...args: unknown[]) => unknown;
    sink[name] = 0;
    (target as Record<string, unknown>)[name] = (...args: unknown[]) => {
      const started = performance.now();
      const result = original.apply(target, args);
      if (result instanceof Promise)
        return result.finally(() => (sink[name]! += performance.now() - started));
      sink[name]! += performance.now() - started;
      return result;
    };
  }
}

async function main(): Promise<DrainAnswer> {
  const rssAtStartMiB = vmHwmMiB();
  const store = BufferStore.openAt(request.dbPath);
  const clientSecret = readFileSync(join(PACKAGE_ROOT, DEMO_SECRET_FILE), 'utf8').trim();
  const client = new UpstreamClient({
    baseUrl: request.sandboxUrl,
    authUrl: request.sandboxUrl,
    clientId: 'demo-client',
    clientSecret,
  });
  const httpMs: Record<string, number> = {};
  const storeMs: Record<string, number> = {};
  const api: DeliveryApi = {
    uploadScans: (body) => client.uploadScans(body),
    requestPresignedUpload: () => client.requestPresignedUpload(),
    putPresigned: (url, body) => client.putPresigned(url, body),
    putPresignedStream: (url, body) => client.putPresignedStream(url, body),
    getScanStatus: (id) => client.getScanStatus(id),
  };
  timed(
    api,
    [
      'uploadScans',
      'requestPresignedUpload',
      'putPresigned',
      'putPresignedStream',
      'getScanStatus',
    ],
    httpMs,
  );
  // `atomically` wraps the whole forming of a batch (the packing rule's read and the batch's write: src/delivery/batcher.ts formBatch).
  timed(store, ['atomically', 'batchBody'], storeMs);
  const config = deliverySchema.parse(request.delivery);
  const deliverer = new Deliverer({ store, api, config, logger: silentLogger() });

  const sumIn = sqlOf(store)
    .prepare(
      `SELECT coalesce(sum(scan_count), 0) FROM batches WHERE state IN (${"'uploaded', 'done'"})`,
    )
    .pluck();
  const sumDone = sqlOf(store)
    .prepare(`SELECT coalesce(sum(scan_count), 0) FROM batches WHERE state = 'done'`)
    .pluck();
  const cpu = process.cpuUsage();
  const started = performance.now();
  deliverer.start();
  let uploadedMs = NaN;
  let confirmedMs = NaN;
  let error: string | undefined;
  let peakHeapTotalMiB = 0;
  let peakExternalMiB = 0;
  while (Number.isNaN(confirmedMs)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const mem = process.memoryUsage();
    peakHeapTotalMiB = Math.max(peakHeapTotalMiB, mem.heapTotal / 2 ** 20);
    peakExternalMiB = Math.max(peakExternalMiB, mem.external / 2 ** 20);
    const elapsed = performance.now() - started;
    if (Number.isNaN(uploadedMs) && (sumIn.get() as number) >= request.expectScans)
      uploadedMs = elapsed;
    if ((sumDone.get() as number) >= request.expectScans) confirmedMs = elapsed;
    if (elapsed > request.timeoutMs) {
      error = `not drained within ${request.timeoutMs} ms: ${JSON.stringify(store.reports.scanCounts())}, last error ${deliverer.snapshot().lastError?.message ?? 'none'}`;
      break;
    }
  }
  const used = process.cpuUsage(cpu);
  const batches = sqlOf(store).prepare('SELECT count(*) FROM batches').pluck().get() as number;
  await deliverer.stop();
  await client.close();
  store.close();
  return {
    ok: error === undefined,
    ...(error ? { error } : {}),
    uploadedMs,
    confirmedMs,
    peakRssMiB: vmHwmMiB(),
    rssAtStartMiB,
    peakHeapTotalMiB,
    peakExternalMiB,
    cpuSec: (used.user + used.system) / 1e6,
    httpMs,
    storeMs,
    batches,
  };
}

main().then(
  (answer) => {
    reply(answer);
    process.exit(0);
  },
  (err: unknown) => {
    reply({ ok: false, error: err instanceof Error ? err.stack : String(err) });
    process.exit(1);
  },
);
