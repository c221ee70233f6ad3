import { describe, expect, it, vi } from 'vitest';
import { LoopTurn, THREAD_YIELD_MS, ThreadTurn } from '../../src/delivery/write-turn.js';

// Word 1 of the shared memory says who holds the turn: 0 none, 1 the thread, 2 the loop.
const holder = (t: LoopTurn) => Atomics.load(t.words, 1);
const nextTick = () => new Promise<void>((resolve) => process.nextTick(resolve));

describe('the turn to write the buffer, between the event loop and the batch thread', () => {
  it("is the loop writer's at once when free, until the next tick", async () => {
    const loop = new LoopTurn();
    expect(loop.take()).toBeUndefined();
    expect(holder(loop)).toBe(2);
    // A second writer in the same turn holds it too.
    expect(loop.take()).toBeUndefined();
    await nextTick();
    expect(holder(loop)).toBe(0);
  });

  it('makes the loop writers wait while the thread writes, and gives them the turn once it ends', async () => {
    const loop = new LoopTurn();
    const thread = new ThreadTurn(loop.buffer);
    let writersWaited: Promise<void> | undefined;
    let sawWaiting = false;
    const order: string[] = [];
    thread.hold(() => {
      order.push('thread writes');
      writersWaited = loop.take();
      // Every writer that asks meanwhile gets the same promise.
      expect(loop.take()).toBe(writersWaited);
      sawWaiting = loop.waiting;
    });
    expect(writersWaited).toBeInstanceOf(Promise);
    expect(sawWaiting).toBe(true);
    await writersWaited!.then(() => {
      order.push('loop writes');
      // Held for the loop, and the thread no longer told to stop.
      expect(holder(loop)).toBe(2);
      expect(loop.waiting).toBe(false);
    });
    expect(order).toEqual(['thread writes', 'loop writes']);
    await nextTick();
    expect(holder(loop)).toBe(0);
  });

  it('waits again the next time the thread writes, also when a wait ended as it began', async () => {
    const loop = new LoopTurn();
    type WaitAsync = (a: Int32Array, i: number, v: number, t: number) => unknown;
    const atomics = Atomics as unknown as { waitAsync: WaitAsync };
    const real = atomics.waitAsync.bind(Atomics);
    // The thread gives the turn back between the loop's two looks: the wait ends at once.
    const spy = vi.spyOn(atomics, 'waitAsync').mockImplementationOnce((a, i, v, t) => {
      Atomics.store(a, i, 0);
      return real(a, i, v, t);
    });
    try {
      Atomics.store(loop.words, 1, 1);
      const first = loop.take();
      expect(first).toBeInstanceOf(Promise);
      await first;
      expect(loop.waiting).toBe(false);
      await nextTick();
      // The thread writes again: a writer waits for it, with the mark set.
      Atomics.store(loop.words, 1, 1);
      const second = loop.take();
      expect(second).not.toBe(first);
      const settled = await Promise.race([
        second!.then(() => 'settled'),
        nextTick().then(() => 'pending'),
      ]);
      expect(settled).toBe('pending');
      expect(loop.waiting).toBe(true);
      loop.threadGone();
      await second;
      expect(loop.waiting).toBe(false);
    } finally {
      spy.mockRestore();
    }
  });

  it('frees a turn the thread held when it ended', async () => {
    const loop = new LoopTurn();
    Atomics.store(loop.words, 1, 1);
    const waited = loop.take();
    expect(waited).toBeInstanceOf(Promise);
    loop.threadGone();
    await waited;
    expect(holder(loop)).toBe(2);
  });

  it('writes in the thread after a bounded wait when the loop keeps its turn or never takes the one it waits for', () => {
    const loop = new LoopTurn();
    const thread = new ThreadTurn(loop.buffer);
    // The loop holds its turn and this test never lets its turn end: the thread takes it anyway.
    expect(loop.take()).toBeUndefined();
    const started = performance.now();
    expect(thread.hold(() => holder(loop))).toBe(1);
    expect(holder(loop)).toBe(0);
    // A writer marked as waiting that never takes its turn: the thread goes on as well.
    Atomics.store(loop.words, 0, 1);
    expect(thread.hold(() => 'written')).toBe('written');
    expect(performance.now() - started).toBeGreaterThanOrEqual(2 * THREAD_YIELD_MS - 1);
  });

  it('waits as long as the bound it was given, each wait', () => {
    const loop = new LoopTurn();
    const thread = new ThreadTurn(loop.buffer, 120);
    // A writer marked as waiting that never takes its turn, and the loop holding its turn.
    Atomics.store(loop.words, 0, 1);
    expect(loop.take()).toBeUndefined();
    const started = performance.now();
    expect(thread.hold(() => holder(loop))).toBe(1);
    expect(performance.now() - started).toBeGreaterThanOrEqual(2 * 120 - 1);
  });

  it("frees the turn when the thread's write throws", () => {
    const loop = new LoopTurn();
    const thread = new ThreadTurn(loop.buffer);
    expect(() =>
      thread.hold(() => {
        throw new Error('SQLITE_FULL');
      }),
    ).toThrow('SQLITE_FULL');
    expect(holder(loop)).toBe(0);
  });
});
