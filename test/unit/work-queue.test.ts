import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../../src/listener/work-queue.js';

/** Blocks the thread for `ms`, as a synchronous SQLite lookup does. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

describe('work queue for synchronous lookups', () => {
  it('runs at most `concurrency` and queues `maxWaiting`; one more is refused at once', async () => {
    const q = new WorkQueue({ concurrency: 1, maxWaiting: 2 });
    const jobs = [1, 2, 3]
      .map((n) => q.run(() => n))
      .filter((j): j is Promise<number> => j !== undefined);
    expect(jobs).toHaveLength(3);
    expect(q.run(() => 4)).toBeUndefined();
    expect(q.running + q.waiting).toBe(3);
    expect(await Promise.all(jobs)).toEqual([1, 2, 3]);
    expect(q.run(() => 5)).toBeDefined();
  });

  it('lets the event loop run between two jobs', async () => {
    const q = new WorkQueue({ concurrency: 1, maxWaiting: 10 });
    const order: string[] = [];
    const jobs = Array.from({ length: 4 }, (_, i) =>
      q.run(() => {
        busy(5);
        order.push(`job ${i}`);
      }),
    ).filter((j): j is Promise<void> => j !== undefined);
    // Scheduled after the first job was queued: served before the last one, not after all.
    setImmediate(() => order.push('io'));
    setTimeout(() => order.push('timer'), 0);
    await Promise.all(jobs);
    expect(order.indexOf('io')).toBeLessThan(order.indexOf('job 3'));
    expect(order.indexOf('timer')).toBeLessThan(order.indexOf('job 3'));
  });

  it('passes a job’s error to its caller and goes on with the next', async () => {
    const q = new WorkQueue({ concurrency: 1, maxWaiting: 1 });
    const failing = q.run(() => {
      throw new Error('buffer closed');
    });
    const next = q.run(() => 'ok');
    await expect(failing).rejects.toThrow('buffer closed');
    expect(await next).toBe('ok');
  });
});
