import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The upstream's side of a secret rotation, as a real HTTP server: an identity provider that
 * accepts a set of client secrets (both while the rotation runs, as a real one does, then the new
 * one only), the tokens it issued (revoked with their secret), and the scan endpoints.
 */
class UpstreamStub {
  readonly accepted = new Set<string>();
  /** The secret of each token request, in order. */
  readonly tokenRequests: string[] = [];
  /** References of every scan the service took. */
  readonly references: string[] = [];
  private readonly tokens = new Map<string, string>();
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.answer(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  /** The secret is no longer accepted, and the tokens issued with it are refused. */
  revoke(secret: string): void {
    this.accepted.delete(secret);
    for (const [token, issuedWith] of this.tokens)
      if (issuedWith === secret) this.tokens.delete(token);
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const url = req.url ?? '';
    if (req.method === 'POST' && url === '/oauth2/token') {
      const secret = new URLSearchParams(body).get('client_secret') ?? '';
      this.tokenRequests.push(secret);
      if (!this.accepted.has(secret)) return json(401, { error: 'invalid_client' });
      const token = `token-${this.tokens.size + 1}-${Math.random().toString(36).slice(2)}`;
      this.tokens.set(token, secret);
      return json(200, { access_token: token, token_type: 'Bearer', expires_in: 3600 });
    }
    const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    if (!this.tokens.has(bearer)) return json(401, { title: 'Unauthorized', status: 401 });
    if (req.method === 'GET' && url === '/api/product/v3/products') return json(200, []);
    if (req.method === 'POST' && url === '/api/trace/v3/scans') {
      const scans = JSON.parse(body) as { reference: string }[];
      this.references.push(...scans.map((s) => s.reference));
      return json(202, { requestId: `req-${this.references.length}` });
    }
    const status = /^\/api\/trace\/v3\/scans\/([^/]+)\/status$/.exec(url);
    if (req.method === 'GET' && status) {
      return json(200, { state: 'Processed', requestId: decodeURIComponent(status[1]!) });
    }
    json(404, { title: 'Not Found', status: 404 });
  }
}

const OLD = {
  secret: 'old-client-secret-1',
  ingest: 'old-ingest-token-0123456789',
  admin: 'old-admin-token-0123456789',
};
const NEW = {
  secret: 'new-client-secret-2',
  ingest: 'new-ingest-token-0123456789',
  admin: 'new-admin-token-0123456789',
};

describe('rotating the secrets with a reload (SIGHUP), no restart', () => {
  let gateway: GatewayProcess | undefined;
  let stub: UpstreamStub | undefined;
  let dir: string | undefined;

  afterEach(async () => {
    await gateway?.stop();
    await stub?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    gateway = stub = dir = undefined;
  });

  it('fetches a token with the new client secret before dropping the old one, and refuses or loses no read', async () => {
    stub = new UpstreamStub();
    await stub.start();
    stub.accepted.add(OLD.secret);
    dir = mkdtempSync(join(tmpdir(), 'sg-rotate-'));
    // The systemd credential folder, as LoadCredential= fills it; the ingest token from its own file.
    const credentials = join(dir, 'credentials');
    mkdirSync(credentials);
    writeFileSync(join(credentials, 'client-secret'), `${OLD.secret}\n`);
    writeFileSync(join(credentials, 'admin-token'), `${OLD.admin}\n`);
    const ingestFile = join(dir, 'ingest-token');
    writeFileSync(ingestFile, `${OLD.ingest}\n`);
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: { id: rotate, timezone: Europe/Berlin }
upstream: { baseUrl: ${stub.url}, authUrl: ${stub.url}, clientId: plant-7, allowInsecureHttp: true }
buffer: { path: ${join(dir, 'buffer.db')} }
delivery: { mode: direct, maxBatchDelayMs: 50, statusPollMs: 100, statusPollMaxMs: 300, retryBaseMs: 100, retryMaxMs: 300 }
http: { listen: 127.0.0.1:0 }
log: { level: info, format: json }
productCheck: { enabled: false }
dcps:
  - { key: GI-01, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042, duplicateWindowMs: 0 }
inputs:
  - { id: mes, type: http, dcp: GI-01, tokenFile: ${ingestFile} }
`,
    );
    gateway = await startGateway(config, { CREDENTIALS_DIRECTORY: credentials }, dir);
    const running = gateway;

    // An MES posting 20 reads a second; it switches to the new ingest token only after the reload.
    let ingestToken = OLD.ingest;
    let sending = true;
    const answers: { reference: string; status: number }[] = [];
    const sender = (async () => {
      for (let n = 1; sending; n++) {
        const reference = `CELL-${n}`;
        const res = await fetch(`${running.httpUrl}/api/v1/reads`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${ingestToken}` },
          body: JSON.stringify({ code: reference }),
        });
        await res.arrayBuffer();
        answers.push({ reference, status: res.status });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    await waitFor(() => stub!.references.length >= 5, {
      timeoutMs: 30_000,
      what: 'the first reads delivered with the old secret',
    });

    // A secret the provider does not take yet: the reload is refused, everything running stays.
    writeFileSync(join(credentials, 'client-secret'), 'not-yet-valid-secret\n');
    running.child.kill('SIGHUP');
    await waitFor(() => /configuration reload could not be applied/.test(running.output()), {
      timeoutMs: 30_000,
      what: 'the refused reload logged',
    });
    const refused = (await (await fetch(`${running.httpUrl}/api/v1/status`)).json()) as {
      config: { lastReloadError?: { message: string } };
    };
    expect(refused.config.lastReloadError?.message).toMatch(
      /upstream\.clientSecret\) were not applied, the running ones stay: token request for client plant-7 refused with HTTP 401/,
    );
    const delivered = stub.references.length;
    await waitFor(() => stub!.references.length >= delivered + 3, {
      timeoutMs: 30_000,
      what: 'reads still delivered with the old secret',
    });

    // The rotation: the provider takes both secrets; the files get the new values; SIGHUP.
    stub.accepted.add(NEW.secret);
    writeFileSync(join(credentials, 'client-secret'), `${NEW.secret}\n`);
    writeFileSync(join(credentials, 'admin-token'), `${NEW.admin}\n`);
    writeFileSync(ingestFile, `${NEW.ingest}\n`);
    const before = stub.tokenRequests.length;
    running.child.kill('SIGHUP');
    await waitFor(() => /"msg":"configuration reloaded"/.test(running.output()), {
      timeoutMs: 30_000,
      what: 'the reload logged',
    });
    // A token was fetched with the new secret, during the reload itself.
    expect(stub.tokenRequests.slice(before)).toContain(NEW.secret);
    const line = running
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"configuration reloaded"'))!;
    expect(JSON.parse(line)).toMatchObject({
      applied: ['upstream.clientSecret', 'http.adminToken', 'inputs.mes.token'],
    });
    const status = (await (await fetch(`${running.httpUrl}/api/v1/status`)).json()) as {
      config: { lastReload?: { applied: string[] } };
    };
    expect(status.config.lastReload?.applied).toEqual([
      'upstream.clientSecret',
      'http.adminToken',
      'inputs.mes.token',
    ]);
    // Names, never values.
    for (const value of [...Object.values(OLD), ...Object.values(NEW)])
      expect(running.output()).not.toContain(value);

    // The old admin token still works until the new one is used; then only the new one does.
    const admin = (token: string) =>
      fetch(`${running.httpUrl}/api/v1/admin/retry`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      }).then((r) => r.status);
    expect(await admin(OLD.admin)).toBe(200);
    expect(await admin(NEW.admin)).toBe(200);
    expect(await admin(OLD.admin)).toBe(401);

    // The provider drops the old secret and its tokens; the MES switches to the new ingest token.
    stub.revoke(OLD.secret);
    const revokedAt = stub.references.length;
    ingestToken = NEW.ingest;
    await waitFor(() => stub!.references.length >= revokedAt + 10, {
      timeoutMs: 30_000,
      what: 'reads delivered after the old secret was revoked',
    });
    sending = false;
    await sender;

    // Every read was taken (none refused by a token), and every one reached the service.
    expect(answers.filter((a) => a.status !== 202)).toEqual([]);
    await waitFor(() => answers.every((a) => stub!.references.includes(a.reference)), {
      timeoutMs: 30_000,
      what: 'every acknowledged read upstream',
    });
    // After the reload no token request used the old secret.
    const afterReload = stub.tokenRequests.slice(stub.tokenRequests.indexOf(NEW.secret, before));
    expect(afterReload).not.toContain(OLD.secret);
    console.log(
      `secret rotation: ${answers.length} reads posted at 20/s, ${stub.references.length} delivered, token requests ${stub.tokenRequests.length}`,
    );
  }, 120_000);
});
