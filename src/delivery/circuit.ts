import type { DeliveryConfig } from '../config/schema.js';
import { backoffDelay } from './retry.js';
import type { Clock } from '../clock.js';

/** `closed`: uploads flow; `open`: waiting out the backoff; `half-open`: the next try is due or under way. */
export type CircuitState = 'closed' | 'open' | 'half-open';

/** Consecutive failures after which the circuit opens (waits out its backoff before the next try). */
export const OPEN_AFTER = 3;

/** What the status page shows of the circuit. */
export interface CircuitSnapshot {
  circuit: CircuitState;
  consecutiveFailures: number;
  /** When the next upload is tried after a failure (ISO 8601); absent after a success. */
  nextRetryAt?: string;
  /** When the first of the failures in a row happened (ISO 8601): when an outage began. Absent after a success. */
  failingSince?: string;
}

/** Options of {@link Circuit}. */
export interface CircuitOptions {
  config: Pick<DeliveryConfig, 'retryBaseMs' | 'retryMaxMs'>;
  now: Clock;
  random?: () => number;
}

/**
 * The upload circuit (docs/delivery.md, "Retries and the circuit"): counts upload failures in a
 * row, draws each backoff from them (full jitter, at least any `Retry-After`), and says whether
 * uploads flow (`closed`), wait (`open`) or are trying again (`half-open`). Held in memory only: a
 * restart starts closed. Runs no loop; the uploader reports each outcome to it.
 */
export class Circuit {
  private consecutiveFailures = 0;
  private nextRetryAt: string | undefined;
  private failingSince: string | undefined;

  constructor(private readonly options: CircuitOptions) {}

  /** An upload step was answered: the count of failures in a row starts again. */
  succeeded(): void {
    this.consecutiveFailures = 0;
    this.nextRetryAt = undefined;
    this.failingSince = undefined;
  }

  /**
   * Counts an upload failure and answers the backoff before the next try, in ms.
   *
   * @param retryAfterMs the service's `Retry-After`, in ms: the delay is at least that.
   */
  failed(retryAfterMs?: number): number {
    this.consecutiveFailures++;
    this.failingSince ??= new Date(this.options.now()).toISOString();
    return backoffDelay(this.consecutiveFailures - 1, {
      baseMs: this.options.config.retryBaseMs,
      maxMs: this.options.config.retryMaxMs,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      ...(this.options.random ? { random: this.options.random } : {}),
    });
  }

  /** The failed batch was given its next attempt at `atMs` (recorded in the buffer). */
  retryAt(atMs: number): void {
    this.nextRetryAt = new Date(atMs).toISOString();
  }

  state(): CircuitState {
    if (this.consecutiveFailures < OPEN_AFTER) return 'closed';
    return this.nextRetryAt && Date.parse(this.nextRetryAt) > this.options.now()
      ? 'open'
      : 'half-open';
  }

  snapshot(): CircuitSnapshot {
    return {
      circuit: this.state(),
      consecutiveFailures: this.consecutiveFailures,
      ...(this.nextRetryAt ? { nextRetryAt: this.nextRetryAt } : {}),
      ...(this.failingSince ? { failingSince: this.failingSince } : {}),
    };
  }
}
