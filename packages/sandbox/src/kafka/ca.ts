import { generateKeyPair, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { createRequire } from 'node:module';
import type * as Forge from 'node-forge';
import { ErrorCodes, GatewayError } from '@scan-gateway/service-kit/errors';

/**
 * The sandbox's own certificate authority: made at start, kept in memory only, so every sandbox
 * run has a new one. The CA certificate is what `GET /_sandbox/kafka` hands out (`caPem`); the
 * server certificate it signs names every address a client may use (librdkafka checks the host
 * name since 2.0: `ssl.endpoint.identification.algorithm=https`). Keys are made by Node's crypto
 * (fast, native); node-forge only builds and signs the X.509 structures.
 */
// node-forge is CommonJS without named ESM exports; `require` gives its typed namespace.
const forge = createRequire(import.meta.url)('node-forge') as typeof Forge;

export interface SandboxTls {
  /** The CA certificate, PEM: the trust anchor clients configure (`ssl.ca.location`, `ca`). */
  caPem: string;
  /** The server certificate, PEM, signed by the CA. */
  certPem: string;
  /** The server key, PEM (PKCS#8). Never logged, never served. */
  keyPem: string;
}

/** Validity of both certificates: one day back (clock skew) to 30 days ahead; a sandbox run is shorter. */
const VALID_DAYS = 30;

// Off the event loop: two 2048-bit keys take a few hundred ms, and the sandbox shares its process.
const generateRsa = promisify(generateKeyPair);

async function rsaKeys(): Promise<{ privateKey: string; publicKey: string }> {
  return generateRsa('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
}

function serial(): string {
  // Positive (top bit clear), 16 random bytes as RFC 5280 §4.1.2.2 allows up to 20.
  const b = randomBytes(16);
  b[0] = (b[0] ?? 0) & 0x7f;
  return b.toString('hex');
}

function validity(cert: Forge.pki.Certificate): void {
  const now = Date.now();
  cert.validity.notBefore = new Date(now - 86_400_000);
  cert.validity.notAfter = new Date(now + VALID_DAYS * 86_400_000);
}

/**
 * Makes a CA and a server certificate (async: the keys are made in Node's thread pool) for `hosts` (names and IP addresses; `localhost`,
 * `127.0.0.1`, `::1` and this machine's host name are always added). Throws `SANDBOX_KAFKA` when
 * node-forge refuses a key or a name.
 */
export async function makeSandboxTls(hosts: string[] = []): Promise<SandboxTls> {
  try {
    const [caKeys, serverKeys] = await Promise.all([rsaKeys(), rsaKeys()]);
    const caKey = forge.pki.privateKeyFromPem(caKeys.privateKey);
    const ca = forge.pki.createCertificate();
    ca.publicKey = forge.pki.publicKeyFromPem(caKeys.publicKey);
    ca.serialNumber = serial();
    validity(ca);
    const caName = [
      { name: 'commonName', value: `scan-gateway sandbox CA ${randomBytes(4).toString('hex')}` },
      { name: 'organizationName', value: 'scan-gateway sandbox' },
    ];
    ca.setSubject(caName);
    ca.setIssuer(caName);
    ca.setExtensions([
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ]);
    ca.sign(caKey, forge.md.sha256.create());

    const cert = forge.pki.createCertificate();
    cert.publicKey = forge.pki.publicKeyFromPem(serverKeys.publicKey);
    cert.serialNumber = serial();
    validity(cert);
    cert.setSubject([{ name: 'commonName', value: 'localhost' }]);
    cert.setIssuer(caName);
    const names = [
      ...new Set(
        ['localhost', '127.0.0.1', '::1', hostname(), ...hosts].filter(
          (h) => h !== '' && h !== '0.0.0.0' && h !== '::',
        ),
      ),
    ];
    cert.setExtensions([
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: names.map((n) => (isIP(n) ? { type: 7, ip: n } : { type: 2, value: n })),
      },
      {
        name: 'authorityKeyIdentifier',
        keyIdentifier: ca.generateSubjectKeyIdentifier().getBytes(),
      },
    ]);
    cert.sign(caKey, forge.md.sha256.create());
    return {
      caPem: forge.pki.certificateToPem(ca),
      certPem: forge.pki.certificateToPem(cert),
      keyPem: serverKeys.privateKey,
    };
  } catch (err) {
    throw new GatewayError(
      ErrorCodes.SANDBOX_KAFKA,
      `the sandbox cannot make its Kafka certificates: ${(err as Error).message}`,
      { cause: err },
    );
  }
}
