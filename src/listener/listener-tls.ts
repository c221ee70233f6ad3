import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import type { SecureContextOptions, Server as TlsServer, TLSSocket } from 'node:tls';
import { type Clock, systemClock } from '../clock.js';
import { ErrorCodes, GatewayError, isGatewayError } from '../errors.js';
import type { HttpTlsConfig } from '../config/schema.js';
import {
  daysLeft,
  readListenerTls,
  validityProblem,
  type ListenerCertificate,
  type ListenerTlsMaterial,
} from '../config/tls-files.js';
import type { Logger } from '../log.js';

/** What the status shows of the local server's TLS (`listener.tls`). Never key material. */
export interface ListenerTlsStatus {
  /** The certificate served now. */
  certificate: ListenerCertificate;
  /** Whole days until it ends, at the status's instant (negative once it ended). */
  daysLeft: number;
  /** Whether clients are asked for a certificate and ingest requires one (`http.tls.clientCaFile`). */
  clientCertificates: boolean;
  /** ISO instant the served pair was read (start, or the last applied reload). */
  loadedAt: string;
  /** Reloads since start: pairs applied, and pairs refused (the served one stayed). */
  reloads: { applied: number; refused: number };
  /** The last refused reload, until a later one is applied. */
  lastRefusal?: { at: string; message: string };
}

/** Options of {@link ListenerTls}. */
export interface ListenerTlsOptions {
  tls: HttpTlsConfig;
  logger: Logger;
  now?: Clock;
  /** File changes within this long are one reload, in ms (a renewal writes two or three files). Default 1000. */
  debounceMs?: number;
}

/**
 * The certificate of the local HTTP server (`http.tls`): read at start, applied to the running
 * server with `setSecureContext` on a reload (SIGHUP, and a change in a folder that holds one of
 * the files), so a renewed certificate is served without a restart and without closing a
 * connection. A new pair that cannot be read, does not match, or is not valid now is refused:
 * logged, counted, shown, and the served pair stays.
 *
 * Folders are watched, not files: a renewal usually replaces a file by renaming (certbot swaps
 * symbolic links, Kubernetes swaps a `..data` link), which a watch on the old file would not see.
 * Every event in such a folder is debounced into one reload, which applies only what changed.
 *
 * The constructor does no I/O; {@link load} reads the files, {@link attach} and {@link watch}
 * follow once the server exists.
 */
export class ListenerTls {
  private material: ListenerTlsMaterial | undefined;
  private hash: string | undefined;
  private loadedAt = 0;
  private server: TlsServer | undefined;
  private watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly reloads = { applied: 0, refused: 0 };
  private lastRefusal: { at: string; message: string } | undefined;
  private readonly now: Clock;

  constructor(private readonly options: ListenerTlsOptions) {
    this.now = options.now ?? systemClock;
  }

  /** Whether ingest requires a client certificate (`http.tls.clientCaFile`). */
  get clientCertificates(): boolean {
    return this.options.tls.clientCaFile !== undefined;
  }

  /**
   * Reads the files for the start. A certificate outside its validity period is served all the
   * same, with a warning: the gateway's other inputs must run, and the page says it (health).
   * @throws GatewayError `SCANGW_E_LISTENER_TLS` when a file cannot be read or the pair does not match.
   */
  load(): void {
    const material = readListenerTls(this.options.tls);
    this.take(material);
    const invalid = validityProblem(material.certificate, this.now());
    if (invalid)
      this.options.logger.warn(
        { component: 'http', certFile: this.options.tls.certFile },
        `served all the same: ${invalid}; clients will refuse it until it is renewed`,
      );
  }

  /**
   * The options of the https server: the pair, and for client certificates the CA, asked of every
   * client but not required at the TLS level (`rejectUnauthorized: false`), so the page works
   * without one; ingest checks it per request ({@link clientCertRefusal}).
   * @throws GatewayError `SCANGW_E_INTERNAL` before {@link load}.
   */
  serverOptions(): SecureContextOptions & { requestCert: boolean; rejectUnauthorized: boolean } {
    const m = this.loaded();
    return {
      ...contextOptions(m),
      requestCert: m.clientCa !== undefined,
      rejectUnauthorized: false,
    };
  }

  /** The server a reload applies the pair to. */
  attach(server: TlsServer): void {
    this.server = server;
  }

  /** Watches the folders of the files; a change reloads after the debounce. Failing to watch is logged: SIGHUP still works. */
  watch(): void {
    const { tls, logger } = this.options;
    const folders = new Set(
      [tls.certFile, tls.keyFile, tls.caFile, tls.clientCaFile]
        .filter((f): f is string => f !== undefined)
        .map((f) => dirname(f)),
    );
    for (const folder of folders) {
      try {
        const w = watch(folder, { persistent: false }, () => this.schedule());
        w.on('error', (err) =>
          logger.warn(
            { component: 'http', err, folder },
            'watching the TLS files failed; reload them with SIGHUP',
          ),
        );
        this.watchers.push(w);
      } catch (err) {
        logger.warn(
          { component: 'http', err, folder },
          'cannot watch the TLS files; reload them with SIGHUP',
        );
      }
    }
  }

  /**
   * Reads the files again and applies a changed pair to the server. Never throws: a refused pair
   * is logged, counted and kept for the status.
   * @returns `applied`, `unchanged` (same files), or `refused`.
   */
  reload(reason: string): 'applied' | 'unchanged' | 'refused' {
    const log = this.options.logger;
    let material: ListenerTlsMaterial;
    try {
      material = readListenerTls(this.options.tls);
      if (hashOf(material) === this.hash) {
        // The files are the served pair again (a bad pair was put back): nothing is refused now.
        if (this.lastRefusal) {
          this.lastRefusal = undefined;
          log.info(
            { component: 'http', reason, serial: this.material?.certificate.serialNumber },
            'TLS files are the served certificate again: the earlier refusal no longer applies',
          );
        }
        return 'unchanged';
      }
      const invalid = validityProblem(material.certificate, this.now());
      if (invalid)
        throw new GatewayError(
          ErrorCodes.LISTENER_TLS,
          `http.tls.certFile ${this.options.tls.certFile}: ${invalid}`,
        );
      // A new context replaces the whole one: the protocol floor and ciphers go with the pair.
      this.server?.setSecureContext(contextOptions(material));
    } catch (err) {
      this.reloads.refused += 1;
      const message = err instanceof Error ? err.message : String(err);
      this.lastRefusal = { at: new Date(this.now()).toISOString(), message };
      // An expected refusal is one line with its code; only an unexpected error keeps its stack.
      const why = isGatewayError(err) ? { code: err.code, why: message } : { err };
      log.error(
        { component: 'http', reason, ...why, served: this.material?.certificate.serialNumber },
        'TLS certificate reload refused; the served certificate stays',
      );
      return 'refused';
    }
    const before = this.material?.certificate.serialNumber;
    this.take(material);
    this.reloads.applied += 1;
    this.lastRefusal = undefined;
    const c = material.certificate;
    log.info(
      {
        component: 'http',
        reason,
        serial: c.serialNumber,
        previous: before,
        validTo: c.validTo,
        subject: c.subject,
      },
      'TLS certificate reloaded: new connections get it',
    );
    return 'applied';
  }

  /** What the status shows, at `nowMs`; undefined before {@link load}. */
  status(nowMs: number): ListenerTlsStatus | undefined {
    const m = this.material;
    if (!m) return undefined;
    return {
      certificate: m.certificate,
      daysLeft: daysLeft(m.certificate, nowMs),
      clientCertificates: this.clientCertificates,
      loadedAt: new Date(this.loadedAt).toISOString(),
      reloads: { ...this.reloads },
      ...(this.lastRefusal ? { lastRefusal: { ...this.lastRefusal } } : {}),
    };
  }

  stop(): void {
    for (const w of this.watchers) w.close();
    this.watchers = [];
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private take(material: ListenerTlsMaterial): void {
    this.material = material;
    this.hash = hashOf(material);
    this.loadedAt = this.now();
  }

  private loaded(): ListenerTlsMaterial {
    if (!this.material)
      throw new GatewayError(
        ErrorCodes.INTERNAL,
        'the TLS files were not loaded before the server was built',
      );
    return this.material;
  }

  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.reload('TLS files changed');
    }, this.options.debounceMs ?? 1000);
    this.timer.unref();
  }
}

/**
 * The TLS 1.2 cipher suites of the local listener: ECDHE key exchange with AES-GCM or
 * ChaCha20-Poly1305 only (forward secrecy, AEAD; no CBC with SHA-1 or SHA-2, no RSA key exchange,
 * no DHE), the TLS 1.2 part of Mozilla's "intermediate" profile. TLS 1.3 suites are node's default
 * (all AEAD); TLS 1.0 and 1.1 are refused (`minVersion`).
 */
export const LISTENER_TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** What the secure context of the listener is made of: the pair, the client CA, protocol and ciphers. */
function contextOptions(m: ListenerTlsMaterial): SecureContextOptions {
  return {
    cert: m.cert,
    key: m.key,
    ...(m.clientCa ? { ca: m.clientCa } : {}),
    minVersion: 'TLSv1.2',
    ciphers: LISTENER_TLS12_CIPHERS,
  };
}

function hashOf(m: ListenerTlsMaterial): string {
  return createHash('sha256')
    .update(m.cert)
    .update('\0')
    .update(m.key)
    .update('\0')
    .update(m.clientCa ?? '')
    .digest('hex');
}

/**
 * Why a request on `socket` may not post reads when client certificates are required: 401 when
 * the client presented none (or the connection is not TLS), 403 when the one presented is not
 * signed by `http.tls.clientCaFile` (or has ended); undefined when it is accepted.
 */
export function clientCertRefusal(
  socket: unknown,
): { statusCode: 401 | 403; message: string } | undefined {
  const s = socket as Partial<TLSSocket>;
  if (typeof s.getPeerCertificate !== 'function')
    return { statusCode: 401, message: 'ingest requires a client certificate over TLS' };
  const peer = s.getPeerCertificate();
  if (!peer || Object.keys(peer).length === 0) {
    return {
      statusCode: 401,
      message:
        'ingest requires a client certificate signed by the CA of http.tls.clientCaFile; the client presented none',
    };
  }
  if (s.authorized) return undefined;
  const who = `${peer.subject?.CN ? `CN=${String(peer.subject.CN)}, ` : ''}serial ${peer.serialNumber ?? '?'}`;
  return {
    statusCode: 403,
    message: `the client certificate (${who}) is not accepted for ingest: ${String(s.authorizationError ?? 'not signed by the CA of http.tls.clientCaFile')}`,
  };
}
