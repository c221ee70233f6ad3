import { createPrivateKey, X509Certificate } from 'node:crypto';
import { ErrorCodes, GatewayError } from '../errors.js';
import { readConfigFile } from '@scan-gateway/service-kit/read-file';
import type { HttpTlsConfig } from './local-schemas.js';

/**
 * The PEM files of `http.tls`: read (bounded, regular files only), parsed and checked the one way
 * for the running server (src/listener/listener-tls.ts) and for `config check` (preflight.ts).
 * Key material never leaves this module but in the answer of {@link readListenerTls}; no message
 * holds any of it.
 */

/** Largest PEM file read, in bytes: a key and a chain of a few certificates are a few kB. */
export const TLS_FILE_MAX_BYTES = 256 * 1024;

/** Days before the end of a certificate from which it is called close to its end (page, config check). */
export const CERT_RENEW_DAYS = 14;

/** What the status, the page and the metrics show of the served certificate. Never key material. */
export interface ListenerCertificate {
  subject: string;
  issuer: string;
  /** Serial number, hex, upper case (as openssl prints it). */
  serialNumber: string;
  /** `DNS:gw.plant.local, IP Address:10.1.2.3`, or undefined when the certificate names none. */
  subjectAltName: string | undefined;
  /** ISO 8601 instants of the validity period (notBefore, notAfter). */
  validFrom: string;
  validTo: string;
  /** SHA-256 fingerprint, `AB:CD:…`. */
  fingerprint256: string;
}

/** The parsed files: what `tls.createSecureContext` takes, and the certificate shown. */
export interface ListenerTlsMaterial {
  /** The server certificate followed by its intermediates (`certFile`, then `caFile`), PEM. */
  cert: string;
  /** The private key, PEM. */
  key: string;
  /** The CAs of client certificates (`clientCaFile`), PEM, when configured. */
  clientCa: string | undefined;
  certificate: ListenerCertificate;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The text of one PEM file; `where` names the key in every error. */
function readPem(where: string, file: string): string {
  let bytes: Buffer;
  try {
    bytes = readConfigFile(file, TLS_FILE_MAX_BYTES);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = e.code && /^E[A-Z]+$/.test(e.code) ? e.code : e.message;
    throw new GatewayError(ErrorCodes.LISTENER_TLS, `${where} ${file}: cannot be read (${why})`, {
      cause: err,
      details: { key: where, file },
    });
  }
  return bytes.toString('utf8');
}

/** The certificates of a PEM text, parsed; at least one. */
function certificates(where: string, file: string, pem: string): X509Certificate[] {
  const blocks = pem.match(PEM_CERT) ?? [];
  if (blocks.length === 0)
    throw new GatewayError(
      ErrorCodes.LISTENER_TLS,
      `${where} ${file}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
      { details: { key: where, file } },
    );
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (err) {
      throw new GatewayError(
        ErrorCodes.LISTENER_TLS,
        `${where} ${file}: certificate ${i + 1} cannot be parsed (${(err as Error).message})`,
        { cause: err, details: { key: where, file } },
      );
    }
  });
}

/** What is shown of `cert`. */
export function describeCertificate(cert: X509Certificate): ListenerCertificate {
  return {
    subject: cert.subject.replace(/\n/g, ', '),
    issuer: cert.issuer.replace(/\n/g, ', '),
    serialNumber: cert.serialNumber.toUpperCase(),
    subjectAltName: cert.subjectAltName,
    validFrom: cert.validFromDate.toISOString(),
    validTo: cert.validToDate.toISOString(),
    fingerprint256: cert.fingerprint256,
  };
}

/**
 * Reads and checks the files of `http.tls`: each readable (a regular file of at most
 * {@link TLS_FILE_MAX_BYTES}), certificates that parse, a key that parses unencrypted and belongs
 * to the first certificate of `certFile`. The validity period is not judged here: the caller
 * decides what an expired certificate means (start: served with a warning; reload: refused).
 *
 * @throws GatewayError `SCANGW_E_LISTENER_TLS` naming the key and the file, never the key's content.
 */
export function readListenerTls(tls: HttpTlsConfig): ListenerTlsMaterial {
  const certPem = readPem('http.tls.certFile', tls.certFile);
  const [leaf] = certificates('http.tls.certFile', tls.certFile, certPem);
  const keyPem = readPem('http.tls.keyFile', tls.keyFile);
  let key;
  try {
    key = createPrivateKey(keyPem);
  } catch (err) {
    const encrypted = /ENCRYPTED/.test(keyPem);
    throw new GatewayError(
      ErrorCodes.LISTENER_TLS,
      `http.tls.keyFile ${tls.keyFile}: ${encrypted ? 'the key is encrypted; give it unencrypted (openssl pkey -in KEY -out KEY.plain), readable only by the service' : 'holds no private key in PEM'}`,
      { cause: err, details: { key: 'http.tls.keyFile', file: tls.keyFile } },
    );
  }
  if (!leaf!.checkPrivateKey(key)) {
    throw new GatewayError(
      ErrorCodes.LISTENER_TLS,
      `http.tls.keyFile ${tls.keyFile} is not the key of the certificate in http.tls.certFile ${tls.certFile} (serial ${leaf!.serialNumber.toUpperCase()}): a renewal replaced one of them but not the other?`,
      { details: { key: 'http.tls.keyFile', file: tls.keyFile } },
    );
  }
  let chain = '';
  if (tls.caFile) {
    const caPem = readPem('http.tls.caFile', tls.caFile);
    certificates('http.tls.caFile', tls.caFile, caPem);
    chain = caPem;
  }
  let clientCa: string | undefined;
  if (tls.clientCaFile) {
    clientCa = readPem('http.tls.clientCaFile', tls.clientCaFile);
    certificates('http.tls.clientCaFile', tls.clientCaFile, clientCa);
  }
  return {
    cert: chain ? `${certPem.trimEnd()}\n${chain}` : certPem,
    key: keyPem,
    clientCa,
    certificate: describeCertificate(leaf!),
  };
}

/** Whole days from `nowMs` to the end of `cert` (negative once it ended), rounded down. */
export function daysLeft(cert: Pick<ListenerCertificate, 'validTo'>, nowMs: number): number {
  return Math.floor((Date.parse(cert.validTo) - nowMs) / 86_400_000);
}

/**
 * Why `cert` should not be served at `nowMs` (ended, or not begun), or undefined when it is within
 * its validity period.
 */
export function validityProblem(
  cert: Pick<ListenerCertificate, 'validFrom' | 'validTo' | 'serialNumber'>,
  nowMs: number,
): string | undefined {
  if (Date.parse(cert.validTo) <= nowMs)
    return `the certificate (serial ${cert.serialNumber}) expired at ${cert.validTo}`;
  if (Date.parse(cert.validFrom) > nowMs)
    return `the certificate (serial ${cert.serialNumber}) is valid only from ${cert.validFrom} (is this machine's clock right?)`;
  return undefined;
}

/** One finding of {@link checkListenerTls}, as `config check` prints it (preflight.ts's shape). */
export interface TlsFinding {
  severity: 'problem' | 'note';
  where: string;
  message: string;
}

/**
 * What `config check` says of `http.tls` at `nowMs`: a problem when a file cannot be read or
 * parsed, the key does not match, or the certificate is not valid now; else a note with the
 * subject, the names, the end and the days left, and a second note when fewer than
 * {@link CERT_RENEW_DAYS} remain.
 */
export function checkListenerTls(tls: HttpTlsConfig, nowMs: number): TlsFinding[] {
  let material: ListenerTlsMaterial;
  try {
    material = readListenerTls(tls);
  } catch (err) {
    const where = String((err as GatewayError).details?.key ?? 'http.tls');
    // config check prints the key before the message: said once.
    const message = (err as Error).message;
    return [
      {
        severity: 'problem',
        where,
        message: message.startsWith(`${where} `) ? message.slice(where.length + 1) : message,
      },
    ];
  }
  const c = material.certificate;
  const invalid = validityProblem(c, nowMs);
  if (invalid)
    return [
      {
        severity: 'problem',
        where: 'http.tls.certFile',
        message: `${tls.certFile}: ${invalid}; renew it (docs/operations.md, "TLS on the local listener")`,
      },
    ];
  const days = daysLeft(c, nowMs);
  const out: TlsFinding[] = [
    {
      severity: 'note',
      where: 'http.tls.certFile',
      message: `${c.subject}, serial ${c.serialNumber}, names ${c.subjectAltName ?? 'none (clients check the name against subjectAltName: add one)'}; valid until ${c.validTo} (${dayCount(days)} left); the key matches`,
    },
  ];
  if (days < CERT_RENEW_DAYS) {
    out.push({
      severity: 'note',
      where: 'http.tls.certFile',
      message: `the certificate ends in ${days === 0 ? 'less than a day' : dayCount(days)}: renew it; the gateway takes the new files without a restart`,
    });
  }
  return out;
}

function dayCount(days: number): string {
  return `${days} day${days === 1 ? '' : 's'}`;
}
