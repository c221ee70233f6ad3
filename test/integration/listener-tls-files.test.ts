import { copyFileSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { preflight } from '../../src/config/preflight.js';
import { parseConfigText } from '../../src/config/load.js';
import { checkListenerTls, readListenerTls } from '../../src/config/tls-files.js';
import { ErrorCodes } from '../../src/errors.js';
import { ListenerTls } from '../../src/listener/listener-tls.js';
import { memoryLogger } from '../helpers/log-lines.js';
import { makeCa, type IssuedCert, type TestCa } from '../helpers/tls-ca.js';

const DAY = 86_400_000;

/**
 * What `config check` says of `http.tls` (src/config/tls-files.ts, preflight.ts), and the reload of
 * a running https server's certificate (src/listener/listener-tls.ts), with certificates from a
 * throw-away CA made by openssl.
 */
describe('http.tls files', () => {
  let dir: string;
  let ca: TestCa;
  let server1: IssuedCert;
  let server2: IssuedCert;
  let longLived: IssuedCert;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sg-tls-files-'));
    ca = makeCa(dir, 'unit');
    server1 = ca.issue('server1', { serial: 0x1001, kind: 'server' });
    server2 = ca.issue('server2', { serial: 0x1002, kind: 'server' });
    longLived = ca.issue('long', { serial: 0x1003, kind: 'server', days: 60 });
  });

  it('a matching pair: a note with the subject, serial, names, end and days left', () => {
    const findings = checkListenerTls(
      { certFile: longLived.certFile, keyFile: longLived.keyFile },
      Date.now(),
    );
    expect(findings).toHaveLength(1);
    expect(findings[0]).toMatchObject({ severity: 'note', where: 'http.tls.certFile' });
    expect(findings[0]!.message).toMatch(
      /CN=long, serial 1003, names DNS:localhost, IP Address:127\.0\.0\.1; valid until \d{4}-\d\d-\d\dT.*\((59|60) days left\); the key matches/,
    );
  });

  it('a certificate near its end: a second note saying to renew', () => {
    const findings = checkListenerTls(
      { certFile: server1.certFile, keyFile: server1.keyFile },
      Date.now(),
    );
    expect(findings.map((f) => f.severity)).toEqual(['note', 'note']);
    expect(findings[1]!.message).toMatch(
      /^the certificate ends in (less than a day|1 day): renew it/,
    );
  });

  it('a key of another certificate: a problem naming keyFile, both files and the serial', () => {
    const findings = checkListenerTls(
      { certFile: server1.certFile, keyFile: server2.keyFile },
      Date.now(),
    );
    expect(findings).toEqual([
      {
        severity: 'problem',
        where: 'http.tls.keyFile',
        message: `${server2.keyFile} is not the key of the certificate in http.tls.certFile ${server1.certFile} (serial 1001): a renewal replaced one of them but not the other?`,
      },
    ]);
  });

  it('an expired certificate: a problem saying when it ended', () => {
    const findings = checkListenerTls(
      { certFile: server1.certFile, keyFile: server1.keyFile },
      server1.notAfterMs + DAY,
    );
    expect(findings).toHaveLength(1);
    expect(findings[0]).toMatchObject({ severity: 'problem', where: 'http.tls.certFile' });
    expect(findings[0]!.message).toMatch(/the certificate \(serial 1001\) expired at \d{4}-/);
  });

  it('a missing file, a file that is not PEM, an encrypted key: problems naming the key and the file', () => {
    const missing = join(dir, 'nope.pem');
    expect(checkListenerTls({ certFile: missing, keyFile: server1.keyFile }, Date.now())).toEqual([
      {
        severity: 'problem',
        where: 'http.tls.certFile',
        message: `${missing}: cannot be read (ENOENT)`,
      },
    ]);
    const text = join(dir, 'text.pem');
    writeFileSync(text, 'not a certificate\n');
    expect(
      checkListenerTls({ certFile: text, keyFile: server1.keyFile }, Date.now())[0]!.message,
    ).toBe(`${text}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
    const encrypted = join(dir, 'encrypted.key');
    writeFileSync(
      encrypted,
      '-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n',
    );
    const f = checkListenerTls({ certFile: server1.certFile, keyFile: encrypted }, Date.now());
    expect(f[0]).toMatchObject({ severity: 'problem', where: 'http.tls.keyFile' });
    expect(f[0]!.message).toMatch(/the key is encrypted; give it unencrypted/);
    // The key's content is never in a message.
    expect(JSON.stringify(f)).not.toMatch(/MIIB/);
  });

  it('a folder given as a file is refused without reading it', () => {
    expect(() => readListenerTls({ certFile: dir, keyFile: server1.keyFile })).toThrow(
      /http\.tls\.certFile .*: cannot be read \(is a folder/,
    );
  });

  it('config check (preflight) reports the files of http.tls with their keys', async () => {
    const yaml = `site: { id: s, timezone: UTC }
upstream: { baseUrl: "https://svc.example", authUrl: "https://svc.example", clientId: c }
buffer: { path: ${join(dir, 'buffer.db')} }
http: { listen: "127.0.0.1:0", tls: { certFile: ${server1.certFile}, keyFile: ${server2.keyFile}, clientCaFile: ${join(dir, 'missing-ca.pem')} } }
dcps: [{ key: D, kind: startOfProcess }]
inputs: []
`;
    const config = parseConfigText(yaml, join(dir, 'config.yaml'));
    const findings = await preflight(config, { env: {} });
    // An unreadable file is said once, by the access check; the pair is judged once every file can be read.
    expect(findings).toEqual([
      {
        severity: 'problem',
        where: 'http.tls.clientCaFile',
        message: `${join(dir, 'missing-ca.pem')} does not exist`,
      },
    ]);
    copyFileSync(ca.certFile, join(dir, 'missing-ca.pem'));
    const again = await preflight(config, { env: {} });
    expect(again.map((f) => [f.severity, f.where])).toEqual([['problem', 'http.tls.keyFile']]);
  });

  describe('a running https server', () => {
    let live: string;
    let server: Server;
    let port: number;
    let tls: ListenerTls;
    const log = memoryLogger('info');
    const servedSerial = () =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(
          { host: '127.0.0.1', port, ca: ca.pem, servername: 'localhost' },
          () => {
            resolve(socket.getPeerCertificate().serialNumber.toUpperCase());
            socket.end();
          },
        );
        socket.once('error', reject);
      });

    beforeAll(async () => {
      live = mkdtempSync(join(tmpdir(), 'sg-tls-live-'));
      copyFileSync(server1.certFile, join(live, 'cert.pem'));
      copyFileSync(server1.keyFile, join(live, 'key.pem'));
      tls = new ListenerTls({
        tls: { certFile: join(live, 'cert.pem'), keyFile: join(live, 'key.pem') },
        logger: log.logger,
      });
      tls.load();
      server = createServer(tls.serverOptions(), (_req, res) => res.end('ok'));
      tls.attach(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      port = (server.address() as { port: number }).port;
    });
    afterAll(async () => {
      tls?.stop();
      await new Promise((resolve) => server?.close(resolve));
    });

    it('applies a renewed pair without a restart, refuses a mismatched one and keeps serving the old', async () => {
      expect(await servedSerial()).toBe('1001');
      expect(tls.reload('SIGHUP')).toBe('unchanged');

      // Half a renewal: the new key beside the old certificate.
      copyFileSync(server2.keyFile, join(live, 'key.pem.new'));
      renameSync(join(live, 'key.pem.new'), join(live, 'key.pem'));
      expect(tls.reload('SIGHUP')).toBe('refused');
      expect(await servedSerial()).toBe('1001');
      const refused = tls.status(Date.now())!;
      expect(refused.reloads).toEqual({ applied: 0, refused: 1 });
      expect(refused.lastRefusal?.message).toMatch(/is not the key of the certificate/);
      expect(
        log
          .parsed()
          .some((l) => l.msg === 'TLS certificate reload refused; the served certificate stays'),
      ).toBe(true);

      // The good key put back: the files are the served pair again, and the refusal is cleared.
      copyFileSync(server1.keyFile, join(live, 'key.pem.new'));
      renameSync(join(live, 'key.pem.new'), join(live, 'key.pem'));
      expect(tls.reload('SIGHUP')).toBe('unchanged');
      expect(tls.status(Date.now())!.lastRefusal).toBeUndefined();

      // The whole renewal.
      copyFileSync(server2.keyFile, join(live, 'key.pem.new'));
      renameSync(join(live, 'key.pem.new'), join(live, 'key.pem'));
      copyFileSync(server2.certFile, join(live, 'cert.pem.new'));
      renameSync(join(live, 'cert.pem.new'), join(live, 'cert.pem'));
      expect(tls.reload('SIGHUP')).toBe('applied');
      expect(await servedSerial()).toBe('1002');
      const applied = tls.status(Date.now())!;
      expect(applied.reloads).toEqual({ applied: 1, refused: 1 });
      expect(applied.lastRefusal).toBeUndefined();
      expect(applied.certificate.serialNumber).toBe('1002');
      expect(applied.certificate.validTo).toBe(new Date(server2.notAfterMs).toISOString());
      // The new context keeps the protocol floor and the cipher list: CBC with SHA-1 stays refused.
      await expect(
        new Promise((resolve, reject) => {
          const socket = connect(
            {
              host: '127.0.0.1',
              port,
              ca: ca.pem,
              servername: 'localhost',
              maxVersion: 'TLSv1.2',
              ciphers: 'ECDHE-ECDSA-AES128-SHA',
            },
            () => resolve(socket.getCipher().name),
          );
          socket.once('error', reject);
        }),
      ).rejects.toThrow(/handshake failure/);
    });

    it('refuses a renewed certificate that has already ended; at start one is served with a warning', () => {
      const later = server1.notAfterMs + DAY;
      const folder = mkdtempSync(join(tmpdir(), 'sg-tls-ended-'));
      copyFileSync(longLived.certFile, join(folder, 'cert.pem'));
      copyFileSync(longLived.keyFile, join(folder, 'key.pem'));
      const t = new ListenerTls({
        tls: { certFile: join(folder, 'cert.pem'), keyFile: join(folder, 'key.pem') },
        logger: log.logger,
        now: () => later,
      });
      t.load();
      copyFileSync(server1.certFile, join(folder, 'cert.pem'));
      copyFileSync(server1.keyFile, join(folder, 'key.pem'));
      expect(t.reload('TLS files changed')).toBe('refused');
      expect(t.status(later)!.certificate.serialNumber).toBe('1003');
      expect(t.status(later)!.lastRefusal?.message).toMatch(
        /the certificate \(serial 1001\) expired at/,
      );

      // At start the gateway's other inputs must run: the ended certificate is served, and said.
      const atStart = new ListenerTls({
        tls: { certFile: server1.certFile, keyFile: server1.keyFile },
        logger: log.logger,
        now: () => later,
      });
      atStart.load();
      expect(atStart.status(later)!.daysLeft).toBe(-1);
      expect(
        log
          .parsed()
          .some((l) =>
            l.msg.startsWith('served all the same: the certificate (serial 1001) expired'),
          ),
      ).toBe(true);
      expect(() =>
        readListenerTls({ certFile: join(dir, 'nope.pem'), keyFile: server1.keyFile }),
      ).toThrow(expect.objectContaining({ code: ErrorCodes.LISTENER_TLS }) as unknown as Error);
    });
  });
});
