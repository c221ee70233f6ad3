import type { ProducedRecord, StoredRecord } from './records.js';
import { type Clock, systemClock } from '@scan-gateway/service-kit/clock';

/** Retention of a topic's records: the older ones go when either bound is passed. */
export interface Retention {
  /** Most records kept per topic. Default 10 000. */
  maxEvents: number;
  /** Oldest record kept, in ms (by the time it was appended). Default 1 h. */
  maxAgeMs: number;
}

export const DEFAULT_RETENTION: Retention = { maxEvents: 10_000, maxAgeMs: 3_600_000 };

/**
 * One single-partition topic in memory: records with consecutive offsets from `logStartOffset`
 * to `highWatermark - 1`. Retention drops from the front (the start offset moves, as Kafka's does).
 */
export class TopicLog {
  private records: Array<StoredRecord & { appendedAt: number }> = [];
  private start = 0;
  private waiters = new Set<() => void>();

  constructor(
    readonly name: string,
    private readonly retention: Retention,
    private readonly now: Clock = systemClock,
  ) {}

  get logStartOffset(): number {
    this.trim();
    return this.start;
  }

  get highWatermark(): number {
    return this.start + this.records.length;
  }

  /** Appends records; gives the offset of the first. Wakes the fetches waiting for data. */
  append(records: ProducedRecord[]): number {
    const base = this.highWatermark;
    const at = this.now();
    records.forEach((r, i) => this.records.push({ ...r, offset: base + i, appendedAt: at }));
    this.trim();
    for (const wake of [...this.waiters]) wake();
    return base;
  }

  /** Records from `offset` on, up to `maxBytes` of keys and values (at least one record when there is one). */
  read(offset: number, maxBytes: number): StoredRecord[] {
    this.trim();
    const out: StoredRecord[] = [];
    let bytes = 0;
    for (let i = offset - this.start; i < this.records.length; i++) {
      const rec = this.records[i];
      if (!rec) break;
      const size = 30 + (rec.key?.length ?? 0) + (rec.value?.length ?? 0);
      if (out.length > 0 && bytes + size > maxBytes) break;
      out.push(rec);
      bytes += size;
    }
    return out;
  }

  /**
   * The first offset whose record's timestamp is at or after `timestamp`, with that timestamp; as
   * Kafka answers ListOffsets, offset and timestamp -1 when no record is that recent.
   */
  offsetForTime(timestamp: number): { offset: number; timestamp: number } {
    this.trim();
    const hit = this.records.find((r) => r.timestamp >= timestamp);
    return hit ? { offset: hit.offset, timestamp: hit.timestamp } : { offset: -1, timestamp: -1 };
  }

  /** Calls `wake` on the next append; the returned function cancels. */
  onAppend(wake: () => void): () => void {
    this.waiters.add(wake);
    return () => this.waiters.delete(wake);
  }

  private trim(): void {
    const oldest = this.now() - this.retention.maxAgeMs;
    let drop = Math.max(0, this.records.length - this.retention.maxEvents);
    while (drop < this.records.length && (this.records[drop]?.appendedAt ?? 0) < oldest) drop++;
    if (drop > 0) {
      this.records = this.records.slice(drop);
      this.start += drop;
    }
  }
}
