import { describe, expect, it } from 'vitest';
import { LoopSleep } from '../../src/loop.js';

/** Long enough that only a wake or an abort can end the sleep before the test's own timeout. */
const HOUR_MS = 3_600_000;

describe('LoopSleep: the interruptible sleep of the background loops', () => {
  it('runs its time out when nothing ends it', async () => {
    await expect(new LoopSleep().sleep(1)).resolves.toBe('elapsed');
    await expect(new LoopSleep().sleep(-5)).resolves.toBe('elapsed');
  });

  it('ends at once when its signal aborts, and answers without sleeping when it had already', async () => {
    const sleeps = new LoopSleep();
    const stop = new AbortController();
    const sleeping = sleeps.sleep(HOUR_MS, stop.signal);
    stop.abort();
    await expect(sleeping).resolves.toBe('aborted');
    await expect(sleeps.sleep(HOUR_MS, stop.signal)).resolves.toBe('aborted');
  });

  it('ends on wake, and a wake while busy ends the next sleep (once)', async () => {
    const sleeps = new LoopSleep();
    const sleeping = sleeps.sleep(HOUR_MS);
    sleeps.wake();
    await expect(sleeping).resolves.toBe('woken');

    sleeps.wake(); // no sleep in progress: kept for the next one
    await expect(sleeps.sleep(HOUR_MS)).resolves.toBe('woken');
    // Used up: the sleep after it runs its time (a short one here), not woken again.
    await expect(sleeps.sleep(1)).resolves.toBe('elapsed');
  });

  it('interrupt ends every sleep in progress but keeps nothing for later', async () => {
    const sleeps = new LoopSleep();
    const both = Promise.all([sleeps.sleep(HOUR_MS), sleeps.sleep(HOUR_MS)]);
    sleeps.interrupt();
    await expect(both).resolves.toEqual(['woken', 'woken']);
    sleeps.interrupt();
    await expect(sleeps.sleep(1)).resolves.toBe('elapsed');
  });

  it('wake ends every sleep in progress, and an abort of one sleep leaves the others', async () => {
    const sleeps = new LoopSleep();
    const stop = new AbortController();
    const stopped = sleeps.sleep(HOUR_MS, stop.signal);
    const other = sleeps.sleep(HOUR_MS);
    stop.abort();
    await expect(stopped).resolves.toBe('aborted');
    sleeps.wake();
    await expect(other).resolves.toBe('woken');
  });

  it('leaves no timer behind when a sleep is woken or aborted', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    const sleeps = new LoopSleep();
    const stop = new AbortController();
    const woken = Array.from({ length: 20 }, () => sleeps.sleep(HOUR_MS));
    const aborted = sleeps.sleep(HOUR_MS, stop.signal);
    expect(timers()).toBe(before + 21);
    stop.abort();
    sleeps.wake();
    await expect(Promise.all(woken)).resolves.toEqual(Array(20).fill('woken'));
    await expect(aborted).resolves.toBe('aborted');
    expect(timers()).toBe(before);
  });

  it('leaves no listener on a long-lived signal after many sleeps', async () => {
    const sleeps = new LoopSleep();
    const stop = new AbortController();
    let added = 0;
    let removed = 0;
    const signal = stop.signal;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = ((...args: Parameters<typeof add>) => {
      added++;
      add(...args);
    }) as typeof add;
    signal.removeEventListener = ((...args: Parameters<typeof remove>) => {
      removed++;
      remove(...args);
    }) as typeof remove;
    for (let i = 0; i < 50; i++) {
      const s = sleeps.sleep(HOUR_MS, signal);
      sleeps.wake();
      await s;
    }
    expect(added).toBe(50);
    expect(removed).toBe(50);
  });
});
