import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startSandbox, type RunningSandbox } from '@scan-gateway/sandbox';
import { batteryPackTemplate } from '@scan-gateway/contract/battery-pack-template';
import { UpstreamClient } from '../../src/upstream/client.js';
import { MAX_DIRECT_BODY_BYTES, type Scan, type ScanState } from '@scan-gateway/contract';
import { waitFor } from '../helpers/wait.js';
import { rejection } from '../helpers/rejection.js';

// The contract suite, part 1: every endpoint and every batch state, UpstreamClient against the
// sandbox over real HTTP.

const SECRET = readFileSync(join(PACKAGE_ROOT, 'config/demo-client-secret'), 'utf8').trim();

function scan(overrides: Partial<Scan> = {}): Scan {
  return {
    reference: `REF-${Math.random().toString(36).slice(2, 10)}`,
    timeStamp: '2025-03-04T05:06:07',
    dcpKey: 'GI-01',
    productModelKey: 'PACK-A',
    supplierKey: 'SUP-0042',
    parents: [],
    attributes: [{ key: 'weight', value: '12.5' }],
    ...overrides,
  };
}

describe('UpstreamClient against the sandbox: endpoints and states', () => {
  let sandbox: RunningSandbox;
  let client: UpstreamClient;

  beforeAll(async () => {
    // Each of Received and InProgress lasts 1 s: long beside a poll every 20 ms on a loaded
    // machine.
    sandbox = await startSandbox({ port: 0, processingDelayMs: 2000 });
    client = new UpstreamClient({
      baseUrl: sandbox.url,
      authUrl: sandbox.url,
      clientId: 'demo-client',
      clientSecret: SECRET,
    });
  });
  afterAll(async () => {
    await client.close();
    await sandbox.close();
  });
  beforeEach(() =>
    sandbox.setFaults({
      errorRate: 0,
      rateLimitRate: 0,
      resetRate: 0,
      latencyMs: 0,
      processingDelayMs: 2000,
    }),
  );

  it('lists the products of the client', async () => {
    const list = await client.listProducts();
    expect(list).toEqual(expect.arrayContaining([{ key: 'PACK-A', name: 'Battery pack A' }]));
  });

  it('creates a BatteryPack with the whole template at version 0, then lists it; a second create is 409', async () => {
    const model = await client.createProduct({
      key: 'PACK-NEW',
      name: 'New pack',
      ofType: 'BatteryPack',
    });
    expect(model).toEqual({ key: 'PACK-NEW', version: 0, properties: batteryPackTemplate() });
    expect(await client.listProducts()).toContainEqual({ key: 'PACK-NEW', name: 'New pack' });

    const dup = await rejection(
      client.createProduct({ key: 'PACK-NEW', name: 'Again', ofType: 'BatteryPack' }),
    );
    expect(dup.code).toBe(ErrorCodes.UPSTREAM_HTTP);
    expect(dup.retryable).toBe(false);
    expect(dup.details).toMatchObject({ status: 409, problem: { status: 409, title: 'Conflict' } });
  });

  it('gets 400 problem details for an unknown product type', async () => {
    const err = await rejection(client.createProduct({ key: 'X-1', name: 'x', ofType: 'Bicycle' }));
    expect(err.details).toMatchObject({ status: 400, problem: { status: 400 } });
    expect(String((err.details.problem as { detail: string }).detail)).toContain('Bicycle');
  });

  it('walks a direct upload through Received, InProgress and Success', async () => {
    const scans = [
      scan(),
      scan({ dcpKey: 'EOL-3', supplierKey: undefined }),
      scan({ dcpKey: 'GO-01', supplierKey: undefined, clientKey: 'C-7' }),
    ];
    const { requestId } = await client.uploadScans(JSON.stringify(scans));
    expect(requestId).toMatch(/^\d+$/);
    const seen: ScanState[] = [];
    const final = await waitFor(
      async () => {
        const status = await client.getScanStatus(requestId);
        if (seen.at(-1) !== status.state) seen.push(status.state);
        expect(status.requestId).toBe(requestId);
        return status.state === 'Success' ? status : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    expect(seen).toEqual(['Received', 'InProgress', 'Success']);
    expect(final).toMatchObject({ state: 'Success', processed: 3 });
    expect(final.failures).toBeUndefined();
  });

  it('reports HasFailures with the reasons of the failed scans', async () => {
    sandbox.setFaults({ processingDelayMs: 20 });
    const good = scan();
    const badDcp = scan({ dcpKey: 'NOPE-9' });
    const badAttr = scan({ attributes: [{ key: '', value: 'x' }] });
    const { requestId } = await client.uploadScans(JSON.stringify([good, badDcp, badAttr]));
    const status = await waitFor(async () => {
      const s = await client.getScanStatus(requestId);
      return s.state === 'HasFailures' ? s : undefined;
    });
    expect(status).toMatchObject({ processed: 3, failed: 2 });
    expect(status.failures).toEqual([
      { reference: badDcp.reference, reason: 'Invalid DCP' },
      { reference: badAttr.reference, reason: 'Attributes could not be read' },
    ]);
  });

  it('reports Failed when every scan failed', async () => {
    sandbox.setFaults({ processingDelayMs: 20 });
    const { requestId } = await client.uploadScans(
      JSON.stringify([scan({ dcpKey: 'X' }), scan({ dcpKey: 'Y' })]),
    );
    const status = await waitFor(async () => {
      const s = await client.getScanStatus(requestId);
      return s.state === 'Failed' ? s : undefined;
    });
    expect(status).toMatchObject({ failed: 2, processed: 2 });
    expect(status.failures?.map((f) => f.reason)).toEqual(['Invalid DCP', 'Invalid DCP']);
  });

  it('reports NotFound for an unknown id, as a string id', async () => {
    const status = await client.getScanStatus('424242');
    expect(status).toMatchObject({ state: 'NotFound', requestId: '424242' });
  });

  it('uploads through a pre-signed address: NotFound before the PUT, processed after, single use', async () => {
    sandbox.setFaults({ processingDelayMs: 20 });
    const address = await client.requestPresignedUpload();
    expect(address.url.startsWith(`${sandbox.url}/_presigned/`)).toBe(true);
    expect((await client.getScanStatus(address.requestId)).state).toBe('NotFound');

    const body = JSON.stringify([scan({ reference: 'PS-1' }), scan({ reference: 'PS-2' })]);
    await client.putPresigned(address.url, body);
    const status = await waitFor(async () => {
      const s = await client.getScanStatus(address.requestId);
      return s.state === 'Success' ? s : undefined;
    });
    expect(status.processed).toBe(2);
    const log = (await (await fetch(`${sandbox.url}/_sandbox/scans`)).json()) as {
      scans: { requestId: string; via: string; scan: Scan }[];
    };
    const mine = log.scans.filter((s) => s.requestId === address.requestId);
    expect(mine.map((s) => [s.via, s.scan.reference])).toEqual([
      ['presigned', 'PS-1'],
      ['presigned', 'PS-2'],
    ]);

    const again = await rejection(client.putPresigned(address.url, body));
    expect(again.code).toBe(ErrorCodes.PRESIGNED_REFUSED);
    expect(String(again.details.body)).toContain('<Code>AccessDenied</Code>');
  });

  it('refuses a body over MAX_DIRECT_BODY_BYTES before sending, and sends one of exactly that size', async () => {
    const one = JSON.stringify([scan({ reference: 'BIG-1' })]);
    const exact =
      one.slice(0, -1) + ' '.repeat(MAX_DIRECT_BODY_BYTES - Buffer.byteLength(one)) + ']';
    expect(Buffer.byteLength(exact)).toBe(MAX_DIRECT_BODY_BYTES);
    const over = `${exact} `;

    await fetch(`${sandbox.url}/_sandbox/requests`, { method: 'DELETE' });
    const err = await rejection(client.uploadScans(over));
    expect(err.code).toBe(ErrorCodes.BODY_TOO_LARGE);
    const log = (await (await fetch(`${sandbox.url}/_sandbox/requests`)).json()) as {
      requests: { path: string }[];
    };
    expect(log.requests.filter((r) => r.path === '/api/trace/v3/scans')).toHaveLength(0);

    const accepted = await client.uploadScans(Buffer.from(exact));
    expect(accepted.requestId).toMatch(/^\d+$/);
  });

  it('gets 413 problem details from the service for a body of 5.8 MiB or more', async () => {
    // The client refuses such bodies itself, so this goes around it, with a valid token.
    const token = await tokenFor(sandbox.url);
    const res = await request(`${sandbox.url}/api/trace/v3/scans`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: `[${' '.repeat(MAX_DIRECT_BODY_BYTES - 1)}]`,
    });
    expect(res.statusCode).toBe(413);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(await res.body.json()).toMatchObject({ status: 413, title: 'Content Too Large' });
  });

  it('reports a refused connection as retryable UPSTREAM_NETWORK', async () => {
    const closed = await startSandbox({ port: 0 });
    const url = closed.url;
    await closed.close();
    const offline = new UpstreamClient({
      baseUrl: url,
      authUrl: url,
      clientId: 'demo-client',
      clientSecret: SECRET,
    });
    const err = await rejection(offline.listProducts());
    expect(err.code).toBe(ErrorCodes.UPSTREAM_NETWORK);
    expect(err.retryable).toBe(true);
    await offline.close();
  });
});

/** A token straight from the token endpoint. */
async function tokenFor(url: string): Promise<string> {
  const res = await request(`${url}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      client_id: 'demo-client',
      client_secret: SECRET,
      grant_type: 'client_credentials',
    }).toString(),
  });
  return ((await res.body.json()) as { access_token: string }).access_token;
}
