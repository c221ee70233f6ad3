import { type Clock, systemClock } from '../clock.js';
import type { GatewayStatus } from './status.js';

/** One ready answer of a probe: status code and JSON text. */
export interface ProbeAnswer {
  code: number;
  body: string;
}

/** The answers of the probes, rendered once per snapshot. */
export interface ProbeAnswers {
  /** `/healthz` to a caller without read access: the state only. */
  healthzState: ProbeAnswer;
  /** `/healthz` with read access: the summary. */
  healthzDetail: ProbeAnswer;
  readyz: ProbeAnswer;
  /** `/api/v1/ha/leader`: the role, the leader and the epoch. */
  leader: ProbeAnswer;
}

/** Options of {@link ProbeSnapshot}. */
export interface ProbeSnapshotOptions {
  /** The whole status (tens of ms of SQL on a large buffer): called at most once per `maxAgeMs`, or on a change. */
  gather: () => GatewayStatus;
  /** The probes' answers from a status. */
  render: (status: GatewayStatus) => ProbeAnswers;
  /**
   * A few in-memory facts whose change the probes must show at once (phase, input states, the
   * election's role and epoch, a failed commit), as text; read per request, so it must cost no I/O.
   * A change gathers anew, though not more often than every `minIntervalMs`.
   */
  changeKey?: () => string;
  /** Oldest snapshot a probe is answered from, in ms; default {@link PROBE_SNAPSHOT_MAX_AGE_MS}. */
  maxAgeMs?: number;
  /** Least time between two gathers for a change of `changeKey`, in ms; default 100. */
  minIntervalMs?: number;
  now?: Clock;
}

/** Oldest status a probe is answered from, in ms: one gather per second at most, whatever the probe rate. */
export const PROBE_SNAPSHOT_MAX_AGE_MS = 1000;

/**
 * The probes' answers (`/healthz`, `/readyz`, `/api/v1/ha/leader`), kept ready: a probe reads a
 * rendered answer and gathers the status (about ten SQL queries, growing with the buffer) only
 * when the snapshot is older than `maxAgeMs` or a cheap fact of `changeKey` moved. So a flood of
 * probes costs one gather a second and the answers' bytes, and no answer holds its own copy of the
 * status (pipelined probes once held a status each: hundreds of MB). A status gathered anyway
 * (the status route, the page) is {@link offer}ed and renews the snapshot for free.
 */
export class ProbeSnapshot {
  private readonly now: Clock;
  private readonly maxAgeMs: number;
  private readonly minIntervalMs: number;
  private current: { at: number; key: string; answers: ProbeAnswers } | undefined;
  private gathered = 0;

  constructor(private readonly options: ProbeSnapshotOptions) {
    this.now = options.now ?? systemClock;
    this.maxAgeMs = options.maxAgeMs ?? PROBE_SNAPSHOT_MAX_AGE_MS;
    this.minIntervalMs = Math.min(options.minIntervalMs ?? 100, this.maxAgeMs);
  }

  /**
   * The probes' answers: the snapshot's while it is fresh, else from a status gathered now.
   * @throws what `gather` throws (the buffer is not open: before the start, after the stop).
   */
  answers(): ProbeAnswers {
    const now = this.now();
    const key = this.options.changeKey?.() ?? '';
    const c = this.current;
    if (c) {
      const age = now - c.at;
      // A clock set back makes the age negative: gather anew rather than serve it for ever.
      const fresh = age >= 0 && age < this.maxAgeMs;
      if (fresh && (key === c.key || age < this.minIntervalMs)) return c.answers;
    }
    this.gathered++;
    return this.store(this.options.gather(), key, now);
  }

  /** Renews the snapshot with a status gathered for another reason (the status route, the page). */
  offer(status: GatewayStatus): void {
    this.store(status, this.options.changeKey?.() ?? '', this.now());
  }

  /** Statuses gathered for the probes since start (not counting those {@link offer}ed). */
  get gathers(): number {
    return this.gathered;
  }

  private store(status: GatewayStatus, key: string, at: number): ProbeAnswers {
    const answers = this.options.render(status);
    this.current = { at, key, answers };
    return answers;
  }
}
