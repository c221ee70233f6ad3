import { pino, type Logger } from 'pino';

/**
 * The sandbox logs through a pino `Logger`: the daemon hands it its own (`logger` in
 * {@link SandboxOptions}), so the sandbox's lines go where the gateway's go, with its redaction.
 */
export type { Logger };

/** A logger that drops everything: the default when the caller gives none (tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
