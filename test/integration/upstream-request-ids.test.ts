import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpstreamClient } from '../../src/upstream/client.js';

// requestIds as a service may write them where the contract shows a number (§2.8) or a string
// (§2.6, §2.7): 64-bit ids do not fit a double, and JSON.parse would round them to another id.
// A real HTTP server answers with the exact bytes of each case.

const BIG = '9007199254740995123'; // 19 digits, above 2^53
let server: Server;
let url: string;
const answers = new Map<string, string>();

beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/oauth2/token')
      return res.end(
        JSON.stringify({ access_token: 'opaque', token_type: 'Bearer', expires_in: 3600 }),
      );
    res.end(answers.get(`${req.method} ${req.url}`) ?? '{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const client = () =>
  new UpstreamClient({ baseUrl: url, authUrl: url, clientId: 'c', clientSecret: 's' });

describe('requestIds too long for a double', () => {
  it('keeps every digit of a numeric requestId in the upload and pre-signed answers', async () => {
    answers.set('POST /api/trace/v3/scans', `{"requestId": ${BIG}}`);
    answers.set(
      'POST /api/trace/v3/scans/preSignedUrl',
      `{"url":"http://s3.test/x?X-Amz-Signature=ab","requestId":${BIG}7 }`,
    );
    const c = client();
    try {
      expect(await c.uploadScans('[]')).toEqual({ requestId: BIG });
      expect((await c.requestPresignedUpload()).requestId).toBe(`${BIG}7`);
    } finally {
      await c.close();
    }
  });

  it('reads a status whose numeric requestId is that long, and one whose requestId cannot be read at all', async () => {
    answers.set(
      `GET /api/trace/v3/scans/${BIG}/status`,
      `{"state":"Success","requestId":${BIG},"description":"ok","processed":2}`,
    );
    answers.set(
      'GET /api/trace/v3/scans/42/status',
      `{"state":"InProgress","requestId":{"id":42},"processed":1}`,
    );
    const c = client();
    try {
      expect(await c.getScanStatus(BIG)).toMatchObject({
        state: 'Success',
        requestId: BIG,
        processed: 2,
      });
      expect(await c.getScanStatus('42')).toMatchObject({ state: 'InProgress', requestId: '42' });
    } finally {
      await c.close();
    }
  });

  it('leaves a requestId inside a string alone', async () => {
    answers.set(
      'GET /api/trace/v3/scans/7/status',
      `{"state":"Failed","requestId":7,"description":"see \\"requestId\\": 12345678901234567890","processed":0}`,
    );
    const c = client();
    try {
      expect(await c.getScanStatus('7')).toMatchObject({
        requestId: '7',
        description: 'see "requestId": 12345678901234567890',
      });
    } finally {
      await c.close();
    }
  });
});

describe('what a failed call says about whether it was sent', () => {
  it('marks a call notSent when no token could be had (auth server refused or hung up) or the connection was refused', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    // An auth server that hangs up mid-answer: the token request may have arrived, the upload never left.
    const hangUp = createServer((req) => req.socket.destroy());
    await new Promise<void>((resolve) => hangUp.listen(0, '127.0.0.1', resolve));
    const hangUpUrl = `http://127.0.0.1:${(hangUp.address() as AddressInfo).port}`;
    const noAuth = new UpstreamClient({
      baseUrl: url,
      authUrl: deadUrl,
      clientId: 'c',
      clientSecret: 's',
    });
    const authHangsUp = new UpstreamClient({
      baseUrl: url,
      authUrl: hangUpUrl,
      clientId: 'c',
      clientSecret: 's',
    });
    const noService = new UpstreamClient({
      baseUrl: deadUrl,
      authUrl: url,
      clientId: 'c',
      clientSecret: 's',
    });
    try {
      for (const c of [noAuth, authHangsUp, noService]) {
        const err = await c.uploadScans('[]').then(
          () => undefined,
          (e: unknown) => e as { code?: string; details?: Record<string, unknown> },
        );
        expect(err?.details?.notSent).toBe(true);
      }
    } finally {
      await Promise.all([noAuth.close(), authHangsUp.close(), noService.close()]);
      await new Promise<void>((resolve) => hangUp.close(() => resolve()));
    }
  });
});
