import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger };

/**
 * Paths pino blanks out wherever they appear. Secrets should never reach a log call in the first
 * place; this is the second line of defence.
 */
export const REDACT_PATHS = [
  'clientSecret',
  'client_secret',
  'secret',
  'password',
  'token',
  'accessToken',
  'access_token',
  'authorization',
  'Authorization',
  '*.clientSecret',
  '*.client_secret',
  '*.secret',
  '*.password',
  '*.token',
  '*.accessToken',
  '*.access_token',
  '*.authorization',
  '*.Authorization',
  'headers.authorization',
  'req.headers.authorization',
  'upstream.clientSecret',
];

export interface CreateLoggerOptions {
  level?: string;
  /** Where to write; defaults to stdout. */
  destination?: NodeJS.WritableStream;
}

/** JSON lines on stdout (journald keeps them); every component logs through `logger.child({ component })`. */
export function createLogger(options: CreateLoggerOptions = {}): Logger {
  const opts: LoggerOptions = {
    level: options.level ?? 'info',
    base: { service: 'scan-gateway' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return options.destination ? pino(opts, options.destination as pino.DestinationStream) : pino(opts);
}

/** A logger that drops everything, for tests and one-shot commands. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
