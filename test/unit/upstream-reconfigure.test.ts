import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UpstreamClient, type UpstreamClientOptions } from '../../src/upstream/client.js';

/** A token endpoint that takes one secret, and a status route that says which token came. */
async function service(accepted: Set<string>): Promise<{ url: string; server: Server }> {
  let issued = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/oauth2/token') {
        const secret = new URLSearchParams(body).get('client_secret') ?? '';
        if (!accepted.has(secret)) {
          res.statusCode = 401;
          return res.end(JSON.stringify({ error: 'invalid_client' }));
        }
        return res.end(JSON.stringify({ access_token: `${secret}-${++issued}`, expires_in: 3600 }));
      }
      const token = (req.headers.authorization ?? '').replace('Bearer ', '');
      res.end(JSON.stringify({ state: 'Success', requestId: '1', description: token }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

let running: { server: Server; client: UpstreamClient } | undefined;
afterEach(async () => {
  await running?.client.close();
  running?.server.closeAllConnections();
  await new Promise((resolve) => running?.server.close(resolve) ?? resolve(undefined));
  running = undefined;
});

describe('upstream client: a reload applies credentials, bounds and the CA', () => {
  it('proves a new secret with a token before it is used; a refused one changes nothing', async () => {
    const accepted = new Set(['old-secret']);
    const { url, server } = await service(accepted);
    const options: UpstreamClientOptions = {
      baseUrl: url,
      authUrl: url,
      clientId: 'c',
      clientSecret: 'old-secret',
    };
    const client = new UpstreamClient(options);
    running = { server, client };
    expect((await client.getScanStatus('1')).description).toMatch(/^old-secret-/);

    const refused = await client
      .reconfigure({ ...options, clientSecret: 'new-secret' })
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({
      code: 'SCANGW_E_UPSTREAM_AUTH',
      details: { notApplied: true, changed: ['upstream.clientSecret'] },
    });
    expect((await client.getScanStatus('1')).description).toMatch(/^old-secret-/);

    accepted.add('new-secret');
    expect(await client.reconfigure({ ...options, clientSecret: 'new-secret' })).toEqual([
      'upstream.clientSecret',
    ]);
    // The token proven in the reload is the one used next.
    expect((await client.getScanStatus('1')).description).toMatch(/^new-secret-/);
  });

  it('applies new bounds without a token, and refuses a CA file that cannot be read', async () => {
    const { url, server } = await service(new Set(['s']));
    const options: UpstreamClientOptions = {
      baseUrl: url,
      authUrl: url,
      clientId: 'c',
      clientSecret: 's',
    };
    const client = new UpstreamClient(options);
    running = { server, client };
    expect(await client.reconfigure({ ...options, maxAnswerBytes: 4096 })).toEqual([
      'upstream.maxAnswerBytes',
    ]);
    expect(await client.reconfigure({ ...options, maxAnswerBytes: 4096 })).toEqual([]);
    await expect(
      client.reconfigure({ ...options, maxAnswerBytes: 4096, caFile: '/nonexistent/ca.pem' }),
    ).rejects.toMatchObject({ code: 'SCANGW_E_CONFIG', details: { notApplied: true } });
    expect((await client.getScanStatus('1')).state).toBe('Success');
  });
});
