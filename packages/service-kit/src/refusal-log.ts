import { type Clock, systemClock } from './clock.js';

/** What a {@link RefusalLog} writes to: a pino logger, or anything with its `warn(fields, message)`. */
export interface WarnLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

/** Default interval between two lines of one {@link RefusalLog}, in ms. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;

/**
 * Logs refused calls (a wrong token, a foreign Host, a connection past the cap) at most once per
 * interval, so a client hammering the server cannot flood the journal. The first refusal of a
 * quiet period is logged at once; later ones are counted, and one line at the end of the interval
 * says how many came (`refused`) and who came last. `fields` say who and how (remote address, the
 * kind of credential), never a token. Totals since start are in {@link RefusalLog.total}.
 *
 * Shared by the daemon's listeners (src/listener) and the sandbox's, which cannot import src/.
 */
export class RefusalLog {
  private lastLineAt = -Infinity;
  private pending = 0;
  private pendingFields: Record<string, unknown> = {};
  private timer: NodeJS.Timeout | undefined;
  /** Refusals since start. */
  total = 0;

  constructor(
    private readonly logger: WarnLogger,
    private readonly message: string,
    private readonly intervalMs = REFUSAL_LOG_INTERVAL_MS,
    private readonly now: Clock = systemClock,
  ) {}

  /** Counts one refusal; logs it now, or in the summary line at the end of the interval. */
  note(fields: Record<string, unknown>): void {
    this.total += 1;
    const t = this.now();
    if (t - this.lastLineAt >= this.intervalMs && this.timer === undefined) {
      this.lastLineAt = t;
      this.logger.warn({ ...fields, refused: 1, intervalMs: this.intervalMs }, this.message);
      return;
    }
    this.pending += 1;
    this.pendingFields = fields;
    this.timer ??= setTimeout(
      () => this.flush(),
      Math.max(0, this.lastLineAt + this.intervalMs - t),
    ).unref();
  }

  /** Writes the summary line of refusals counted but not yet logged (also at stop). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending === 0) return;
    this.lastLineAt = this.now();
    this.logger.warn(
      { ...this.pendingFields, refused: this.pending, intervalMs: this.intervalMs },
      `${this.message} (${this.pending} since the last line)`,
    );
    this.pending = 0;
    this.pendingFields = {};
  }
}
