import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferStore, type IntakeRecord } from '../../src/buffer/store.js';
import { deliverySchema } from '../../src/config/schema.js';
import { Deliverer } from '../../src/delivery/deliverer.js';
import type { DeliveryApi } from '../../src/delivery/types.js';
import { ErrorCodes } from '../../src/errors.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { waitFor } from '../helpers/wait.js';

// The logging rule: a service that is down is one line per failure with the
// code, the cause and the next attempt, without a stack; a stack only for a bug.

function scan(reference: string): IntakeRecord {
  const body = {
    reference,
    timeStamp: '2026-11-18T07:00:00',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
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

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function run(api: DeliveryApi) {
  const store = BufferStore.openAt(join(mkdtempSync(join(tmpdir(), 'sg-faillog-')), 'buffer.db'));
  const mem = memoryLogger('info');
  const config = deliverySchema.parse({
    mode: 'direct',
    maxBatchDelayMs: 0,
    retryBaseMs: 20,
    retryMaxMs: 50,
  });
  const deliverer = new Deliverer({ store, api, config, logger: mem.logger });
  cleanups.push(
    () => store.close(),
    () => deliverer.stop(),
  );
  store.intake.commitIntake([scan('A')], Date.now());
  deliverer.start();
  return { mem, deliverer };
}

describe('failure log lines', () => {
  it('logs a refused connection and a 503 as one line each with code, cause and next attempt, no stack', async () => {
    let calls = 0;
    const svc = createServer((req, res) => {
      if (req.url === '/oauth2/token')
        return res.end(JSON.stringify({ access_token: 't', expires_in: 3600 }));
      calls++;
      res.writeHead(503, { 'content-type': 'text/plain' }).end('down for maintenance');
    });
    await new Promise<void>((resolve) => svc.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => svc.close(resolve)));
    const url = `http://127.0.0.1:${(svc.address() as AddressInfo).port}`;
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));

    for (const [baseUrl, code, cause] of [
      [deadUrl, ErrorCodes.UPSTREAM_NETWORK, 'ECONNREFUSED'],
      [url, ErrorCodes.UPSTREAM_HTTP, 503],
    ] as const) {
      const client = new UpstreamClient({
        baseUrl,
        authUrl: url,
        clientId: 'c',
        clientSecret: 's',
      });
      cleanups.push(() => client.close());
      const { mem } = run(client);
      const failures = () => mem.parsed().filter((l) => l.msg === 'upload failed; will retry');
      await waitFor(() => failures().length >= 2, { what: `two failures logged for ${code}` });
      for (const line of failures()) {
        expect(line).toMatchObject({
          code,
          cause,
          reason: expect.any(String),
          nextAttemptAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
          retryInMs: expect.any(Number),
        });
        expect(line).not.toHaveProperty('err');
      }
      expect(mem.lines.every((l) => !l.includes('    at '))).toBe(true);
    }
    expect(calls).toBeGreaterThanOrEqual(2);
  });

  it('keeps the stack for an error that is not an upstream failure (a bug)', async () => {
    const api: DeliveryApi = {
      uploadScans: () => Promise.reject(new TypeError('cannot read properties of undefined')),
      requestPresignedUpload: () => Promise.reject(new Error('unused')),
      putPresigned: () => Promise.reject(new Error('unused')),
      getScanStatus: () => Promise.reject(new Error('unused')),
    };
    const { mem } = run(api);
    // Not an upstream answer: the delivery step itself failed, and says so with the whole error.
    const failed = (l: { msg: string }) => l.msg === 'delivery step failed; retrying every second';
    await waitFor(() => mem.parsed().some(failed));
    const line = mem.parsed().find(failed)!;
    expect(line).toMatchObject({
      err: { type: 'TypeError', stack: expect.stringContaining('    at ') },
    });
  });
});
