import { spawnSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A throw-away CA made with the openssl command line, as an operator would make one
 * (docs/operations.md, "TLS on the local listener"): EC P-256 keys, certificates for a server
 * (localhost, 127.0.0.1) or a client. A test that needs it fails when openssl is missing.
 */

/** A certificate and its key, as PEM files, with what a test compares. */
export interface IssuedCert {
  certFile: string;
  keyFile: string;
  /** Serial number, hex upper case, as node's X509Certificate and getPeerCertificate tell it. */
  serial: string;
  /** notAfter, ms since the epoch. */
  notAfterMs: number;
  /** base64 SHA-256 of the public key (SPKI), for Chromium's --ignore-certificate-errors-spki-list. */
  spkiSha256: string;
}

export interface TestCa {
  certFile: string;
  keyFile: string;
  /** The CA's certificate, PEM. */
  pem: string;
  /** Issues a certificate signed by this CA into `dir/<name>.pem` and `dir/<name>.key`. */
  issue(
    name: string,
    opts: { serial: number; kind: 'server' | 'client'; days?: number },
  ): IssuedCert;
}

function openssl(args: string[], cwd: string): void {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (r.error && (r.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error(
      'openssl is required for the TLS tests but was not found on PATH; install it: apt-get install openssl',
    );
  }
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed:\n${r.stderr}`);
}

/** What a test needs to know of a PEM certificate file. */
export function certFacts(
  certFile: string,
): Pick<IssuedCert, 'serial' | 'notAfterMs' | 'spkiSha256'> {
  const cert = new X509Certificate(readFileSync(certFile));
  return {
    serial: cert.serialNumber.toUpperCase(),
    notAfterMs: cert.validToDate.getTime(),
    spkiSha256: createHash('sha256')
      .update(cert.publicKey.export({ type: 'spki', format: 'der' }))
      .digest('base64'),
  };
}

/** Makes a CA named `name` in `dir` (`name-ca.pem`, `name-ca.key`). */
export function makeCa(dir: string, name: string): TestCa {
  const certFile = join(dir, `${name}-ca.pem`);
  const keyFile = join(dir, `${name}-ca.key`);
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '3',
      '-subj',
      `/CN=${name} test CA`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  return {
    certFile,
    keyFile,
    pem: readFileSync(certFile, 'utf8'),
    issue(leaf, opts) {
      const leafCert = join(dir, `${leaf}.pem`);
      const leafKey = join(dir, `${leaf}.key`);
      const csr = join(dir, `${leaf}.csr`);
      const ext = join(dir, `${leaf}.ext`);
      writeFileSync(
        ext,
        opts.kind === 'server'
          ? 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n'
          : 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n',
      );
      openssl(
        [
          'req',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:P-256',
          '-nodes',
          '-keyout',
          leafKey,
          '-out',
          csr,
          '-subj',
          `/CN=${leaf}`,
        ],
        dir,
      );
      openssl(
        [
          'x509',
          '-req',
          '-in',
          csr,
          '-CA',
          certFile,
          '-CAkey',
          keyFile,
          '-set_serial',
          String(opts.serial),
          '-days',
          String(opts.days ?? 2),
          '-extfile',
          ext,
          '-out',
          leafCert,
        ],
        dir,
      );
      return { certFile: leafCert, keyFile: leafKey, ...certFacts(leafCert) };
    },
  };
}
