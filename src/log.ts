import { pino, type Logger, type LoggerOptions } from 'pino';
import { createRequire } from 'node:module';
import type PinoPretty from 'pino-pretty';

export type { Logger };

/**
 * Paths pino blanks out wherever they appear. Secrets should never reach a log call in the first
 * place; this is the second line of defence, and {@link SecretScrubber} the third.
 */
export const REDACT_PATHS = [
  'clientSecret',
  'client_secret',
  'secret',
  'password',
  'token',
  'adminToken',
  'accessToken',
  'access_token',
  'authorization',
  'Authorization',
  'cookie',
  '*.clientSecret',
  '*.client_secret',
  '*.secret',
  '*.password',
  '*.token',
  '*.adminToken',
  '*.accessToken',
  '*.access_token',
  '*.authorization',
  '*.Authorization',
  '*.cookie',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  'upstream.clientSecret',
];

/** What replaces a secret in a log line. */
export const REDACTED = '[redacted]';

/** Tokens that look like JWTs (header.payload.signature, both JSON parts base64url of `{"`). */
const JWT = /eyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}/g;
/** `Bearer <credential>` wherever it was written into a message or an error. */
const BEARER = /(Bearer\s+)(?!\[redacted\])[A-Za-z0-9._~+/=-]{6,}/gi;

/**
 * A PEM block (`-----BEGIN PRIVATE KEY-----` … `-----END PRIVATE KEY-----`), whatever its label:
 * private keys, and certificates and requests with them (a key file dropped into an inbox, read as
 * data). Lazy to the first END of the same label.
 */
const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]{1,64})-----[\s\S]*?-----END \1-----/g;
/**
 * A PEM block cut before its END (the first 4 KiB of a file in a rejection, a read of one line):
 * the BEGIN line and what follows of base64, white space, header lines (`Proc-Type: 4,ENCRYPTED`),
 * and line breaks as JSON (`\n`) or printed reads (`<LF>`, `<CR>`) write them.
 */
const PEM_OPEN = /-----BEGIN [A-Z0-9 ]{1,64}-----(?:[A-Za-z0-9+/=\s:,.-]|\\[nrt]|<(?:LF|CR|HT)>)*/g;
/**
 * The base64 body of a key without its PEM lines (a key file read one line a read): a run of 60
 * base64 characters or more (a PEM line is 64, an OpenSSH one 70) that mixes upper case, lower
 * case and digits. Barcodes, hashes (hex) and request ids do not look so; a long base64 payload
 * in a read is masked where it is shown, never in the buffer or what is sent.
 */
const BASE64_RUN = /(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{60,}={0,2}(?![A-Za-z0-9+/=])/g;

function maskKeyBody(run: string): string {
  return /[a-z]/.test(run) && /[A-Z]/.test(run) && /[0-9]/.test(run) ? REDACTED : run;
}

/**
 * The last line of defence against a secret in the logs: every finished log line is searched for
 * the secret values the process knows (client secret, admin token: added once read), for anything
 * shaped like a JWT (the upstream access token), for `Bearer <credential>` and for key material (PEM
 * blocks, whole or cut short, and the base64 of a DER key: a key file dropped into an inbox is
 * data to the gateway, shown in the status, the page and `failures`), and each is replaced
 * by `[redacted]`. Works on the serialized line, so it also catches a secret inside an error
 * message or a nested object that no redact path names.
 */
export class SecretScrubber {
  private readonly needles = new Set<string>();

  constructor(secrets: Iterable<string> = []) {
    for (const s of secrets) this.add(s);
  }

  /** Remembers a secret value; values shorter than 4 characters are ignored (they would blank out ordinary text). */
  add(secret: string | undefined): void {
    if (!secret || secret.length < 4) return;
    this.needles.add(secret);
    // The line is JSON: a secret holding quotes, backslashes or control characters appears escaped.
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret) this.needles.add(escaped);
  }

  /**
   * `line` with every known secret, JWT, bearer credential and private-key shape (a PEM block,
   * also one cut short, and the bare base64 of a DER key) replaced.
   */
  scrub(line: string): string {
    let out = line;
    for (const needle of this.needles)
      if (out.includes(needle)) out = out.split(needle).join(REDACTED);
    if (out.includes('eyJ')) out = out.replace(JWT, REDACTED);
    if (/bearer/i.test(out)) out = out.replace(BEARER, `$1${REDACTED}`);
    if (out.includes('-----BEGIN '))
      out = out.replace(PEM_BLOCK, REDACTED).replace(PEM_OPEN, REDACTED);
    out = out.replace(BASE64_RUN, maskKeyBody);
    return out;
  }

  /**
   * A copy of `value` (JSON-like: objects, arrays, strings, numbers…) with every string scrubbed,
   * keys included. For what leaves the process other than log lines: the status JSON,
   * the health page, the `failures` report. Values that are not plain objects or arrays (a Date)
   * are kept as they are.
   */
  scrubDeep<T>(value: T): T {
    return scrubValue(value, (text) => this.scrub(text)) as T;
  }
}

/** `value` with `scrub` applied to every string in it (plain objects and arrays walked, copied). */
export function scrubValue(value: unknown, scrub: (text: string) => string): unknown {
  if (typeof value === 'string') return scrub(value);
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, scrub));
  if (
    value !== null &&
    typeof value === 'object' &&
    Object.getPrototypeOf(value) === Object.prototype
  ) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[scrub(k)] = scrubValue(v, scrub);
    return out;
  }
  return value;
}

export interface CreateLoggerOptions {
  /** pino level name (`fatal` … `trace`, or `silent`). Default `info`. */
  level?: string;
  /** Where to write; defaults to stdout (file descriptor 1, written synchronously). */
  destination?: NodeJS.WritableStream;
  /**
   * `json`: one JSON object per line (journald, log shippers). `pretty`: coloured, human-readable
   * lines. `auto` (default): pretty when the destination is a terminal, else JSON.
   */
  format?: 'auto' | 'json' | 'pretty';
  /** Secret values to cut out of every line; more can be added later with `scrubber.add`. */
  scrubber?: SecretScrubber;
  /** `component` of lines logged without one (by the root logger). Default `main`. */
  component?: string;
}

/** Loggers whose bindings (set by `child`) already carry a `component`, cached per logger. */
const hasComponent = new WeakMap<object, boolean>();

function boundComponent(logger: Logger): boolean {
  let known = hasComponent.get(logger);
  if (known === undefined) {
    known = typeof logger.bindings().component === 'string';
    hasComponent.set(logger, known);
  }
  return known;
}

/**
 * The process logger: JSON lines on stdout (journald keeps them), human-readable on a terminal.
 * Every line carries `component` (the root logger's lines get `main`; each part logs through
 * `logger.child({ component })`), errors are logged as `{ err }`, and secrets are removed by
 * {@link REDACT_PATHS} and the {@link SecretScrubber}.
 */
export function createLogger(options: CreateLoggerOptions = {}): Logger {
  const scrubber = options.scrubber ?? new SecretScrubber();
  const fallback = options.component ?? 'main';
  const opts: LoggerOptions = {
    level: options.level ?? 'info',
    base: { service: 'scan-gateway' },
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin(obj, _level, logger) {
      if (
        typeof (obj as { component?: unknown }).component === 'string' ||
        boundComponent(logger as Logger)
      )
        return {};
      return { component: fallback };
    },
    hooks: { streamWrite: (line: string) => scrubber.scrub(line) },
  };
  const destination = options.destination ?? process.stdout;
  const format = options.format ?? 'auto';
  const isTty = (destination as NodeJS.WriteStream).isTTY === true;
  if (format === 'pretty' || (format === 'auto' && isTty)) {
    // Loaded for a terminal only: the daemon under systemd writes JSON and never needs it, so it
    // does not pay its load time and memory.
    const pretty = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
    const stream = pretty({
      destination,
      sync: true,
      colorize: isTty,
      translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l',
      ignore: 'pid,hostname,service,component',
      messageFormat: '{if component}[{component}] {end}{msg}',
      hideObject: false,
    });
    return pino(opts, stream);
  }
  return options.destination
    ? pino(opts, options.destination as pino.DestinationStream)
    : pino(opts);
}

/** A logger that drops everything, for tests and one-shot commands. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
