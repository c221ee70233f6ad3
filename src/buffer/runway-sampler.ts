import type { Clock } from '../clock.js';
import {
  RUNWAY_SAMPLE_MS,
  RUNWAY_WINDOW_MS,
  estimateRunway,
  type Runway,
  type ScanIdSample,
} from './runway.js';
import type { BufferStore } from './store.js';

/**
 * The samples the runway estimate (runway.ts, pure arithmetic) is made from, kept by the disk
 * guard (disk-guard.ts) at its checks: the newest scan id once a minute over the last day.
 */
export class RunwaySampler {
  /** The newest scan id once a minute over the last day, oldest first (runway.ts). */
  private idSamples: ScanIdSample[] = [];
  /** The last estimate; `undefined` until one can be made, and for a buffer in memory. */
  runway: Runway | undefined;

  constructor(private readonly now: Clock) {}

  /**
   * Once a minute: the newest scan id, for the rate of the last day, and the estimate of how long
   * the free space lasts at it. Two seeks and two pragmas, no count of rows. `free()` gives the
   * free bytes of the file system (`undefined`: unknown), `lowFreeMark()` the low-space mark.
   */
  sample(
    store: Pick<BufferStore, 'path' | 'pruning' | 'space'>,
    free: () => number | undefined,
    lowFreeMark: () => number,
  ): void {
    if (store.path === ':memory:') return;
    const at = this.now();
    const last = this.idSamples.at(-1);
    if (last && at - last.at < RUNWAY_SAMPLE_MS) return;
    const span = store.pruning.scanIdSpan();
    this.idSamples.push({ at, lastId: span.last });
    while (this.idSamples.length > 2 && at - this.idSamples[1]!.at >= RUNWAY_WINDOW_MS)
      this.idSamples.shift();
    const freeBytes = free();
    this.runway =
      freeBytes === undefined
        ? undefined
        : estimateRunway({
            samples: this.idSamples,
            freeBytes,
            lowFreeBytes: lowFreeMark(),
            usedBytes: store.space.usedBytes(),
            scansHeld: span.last > 0 ? span.last - span.first + 1 : 0,
          });
  }
}
