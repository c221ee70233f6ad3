/**
 * How long the buffer disk's free space lasts at the current rate of scans, if none of them were
 * delivered from now on (an outage of the upstream): the figure a site sizes its disk by
 * (docs/performance.md, "A weekend without the cloud"). Pure arithmetic; the disk guard
 * (disk-guard.ts) samples the inputs.
 */

/**
 * Bytes one scan takes in the buffer when it holds too few to measure (row, keys, indexes, body
 * and its read), measured by the `outage` bench row on a backlog of pending scans of about 250
 * bytes of JSON (docs/performance.md).
 */
export const DEFAULT_BYTES_PER_SCAN = 750;
/** Scans the buffer must hold before its own bytes per scan are trusted over {@link DEFAULT_BYTES_PER_SCAN}. */
export const MEASURED_FROM_SCANS = 10_000;
/** The rate is taken over this window: a day, so a night shift's pause does not read as no scans. */
export const RUNWAY_WINDOW_MS = 24 * 3600_000;
/** No estimate before the rate was watched this long, in ms: a minute's burst is no day's rate. */
export const RUNWAY_MIN_WINDOW_MS = 10 * 60_000;
/** How often the count of scans is sampled for the rate, in ms. */
export const RUNWAY_SAMPLE_MS = 60_000;

/** The estimate, as the status and the metric give it. */
export interface Runway {
  /** Days until free space falls to the low-space mark at `scansPerDay`, none delivered. */
  days: number;
  /** Scans written per day, over the last day (or since start, when shorter). */
  scansPerDay: number;
  /** Bytes one scan takes in the buffer (measured, or {@link DEFAULT_BYTES_PER_SCAN}). */
  bytesPerScan: number;
  /** Length of the window the rate was taken over, in ms. */
  windowMs: number;
  /** The estimate in words, {@link runwayText}: "12 days of scans at today's rate". */
  text: string;
}

/** One sample of the newest scan's id, at a time in epoch ms. */
export interface ScanIdSample {
  at: number;
  lastId: number;
}

/**
 * The estimate from the samples (oldest first, at most a day apart; ids only grow), the free
 * bytes, the low-space mark (below it the audit yields, so that is where "full" begins), the
 * bytes the buffer's pages use and the scans it holds. Undefined before {@link
 * RUNWAY_MIN_WINDOW_MS} of samples, and when no scan was written in the window (the space lasts).
 */
export function estimateRunway(input: {
  samples: readonly ScanIdSample[];
  freeBytes: number;
  lowFreeBytes: number;
  usedBytes: number;
  scansHeld: number;
}): Runway | undefined {
  const first = input.samples[0];
  const last = input.samples.at(-1);
  if (!first || !last) return undefined;
  const windowMs = last.at - first.at;
  if (windowMs < RUNWAY_MIN_WINDOW_MS) return undefined;
  const written = last.lastId - first.lastId;
  if (written <= 0) return undefined;
  const scansPerDay = (written * 86_400_000) / windowMs;
  const bytesPerScan =
    input.scansHeld >= MEASURED_FROM_SCANS
      ? input.usedBytes / input.scansHeld
      : DEFAULT_BYTES_PER_SCAN;
  const room = Math.max(0, input.freeBytes - input.lowFreeBytes);
  const days = room / (scansPerDay * bytesPerScan);
  return { days, scansPerDay, bytesPerScan, windowMs, text: runwayText(days) };
}

/** `days` in words, "12 days of scans at today's rate", for the page. */
export function runwayText(days: number): string {
  const span =
    days >= 2
      ? `${Math.floor(days)} days`
      : days * 24 >= 2
        ? `${Math.floor(days * 24)} hours`
        : `${Math.max(0, Math.floor(days * 24 * 60))} minutes`;
  return `${span} of scans at today's rate`;
}
