import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LookupUnavailable, LookupWorkers } from '../../src/queries/lookup-workers.js';
import { silentLogger } from '../../src/log.js';

/**
 * The threads' lifecycle with a stand-in thread script (no buffer): it answers a trace with the
 * question itself and its thread id, throws for "throw", exits for "die" and never answers "hang".
 * The real script, on a real buffer, is exercised through the app in
 * test/integration/listener-fairness.test.ts and the item route tests.
 */
const dir = mkdtempSync(join(tmpdir(), 'sg-lookup-workers-'));
const script = join(dir, 'stand-in.mjs');
writeFileSync(
  script,
  `import { parentPort, threadId } from 'node:worker_threads';
parentPort.on('message', ({ id, question }) => {
  if (question.reference === 'die') process.exit(3);
  if (question.reference === 'hang') for (;;);
  if (question.reference === 'throw') return parentPort.postMessage({ id, error: 'no such table: scan_rows' });
  parentPort.postMessage({ id, code: 200, json: JSON.stringify({ reference: question.reference, threadId }) });
});
`,
);

const trace = (reference: string) => ({ kind: 'trace' as const, reference });
const threadOf = (json: string) => (JSON.parse(json) as { threadId: number }).threadId;

describe('LookupWorkers', () => {
  const made: LookupWorkers[] = [];
  const workers = (options: { threads?: number; deadlineMs?: number } = {}) => {
    const w = new LookupWorkers({
      path: join(dir, 'none.db'),
      threads: options.threads ?? 1,
      logger: silentLogger(),
      script: pathToFileURL(script),
      ...(options.deadlineMs ? { deadlineMs: options.deadlineMs } : {}),
    });
    made.push(w);
    return w;
  };
  afterEach(async () => {
    for (const w of made.splice(0)) await w.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('starts a thread at the first question and answers in it, the JSON made there', async () => {
    const w = workers();
    expect(w.threads).toBe(0);
    const answer = await w.run(trace('W0'), new Map());
    expect(answer.code).toBe(200);
    expect(JSON.parse(answer.json)).toMatchObject({ reference: 'W0' });
    expect(w.threads).toBe(1);
    expect(threadOf((await w.run(trace('W1'), new Map())).json)).toBe(threadOf(answer.json));
  });

  it('fails the question in flight with a reason when its thread dies, and starts another for the next', async () => {
    const w = workers();
    const first = threadOf((await w.run(trace('W0'), new Map())).json);
    const died = await w.run(trace('die'), new Map()).catch((err: unknown) => err);
    expect(died).toBeInstanceOf(LookupUnavailable);
    expect((died as LookupUnavailable).reason).toMatch(/exited \(code 3\).*started again/);
    const next = await w.run(trace('W0'), new Map());
    expect(next.code).toBe(200);
    expect(threadOf(next.json)).not.toBe(first);
  });

  it('ends a thread past the deadline: the lookup fails with a reason, the next is answered', async () => {
    const w = workers({ deadlineMs: 300 });
    const late = await w.run(trace('hang'), new Map()).catch((err: unknown) => err);
    expect(late).toBeInstanceOf(LookupUnavailable);
    expect((late as LookupUnavailable).reason).toMatch(/longer than 300 ms/);
    expect((await w.run(trace('W0'), new Map())).code).toBe(200);
  });

  it('rejects with the thread’s error message when the question failed there (a 500, not a 503)', async () => {
    const w = workers();
    const failed = await w.run(trace('throw'), new Map()).catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(Error);
    expect(failed).not.toBeInstanceOf(LookupUnavailable);
    expect((failed as Error).message).toBe('no such table: scan_rows');
  });

  it('answers questions beyond its threads in order, and several at once with several threads', async () => {
    const one = workers();
    const answers = await Promise.all(['A', 'B', 'C'].map((r) => one.run(trace(r), new Map())));
    expect(answers.map((a) => (JSON.parse(a.json) as { reference: string }).reference)).toEqual([
      'A',
      'B',
      'C',
    ]);
    const two = workers({ threads: 2 });
    const both = await Promise.all(['A', 'B'].map((r) => two.run(trace(r), new Map())));
    expect(new Set(both.map((a) => threadOf(a.json))).size).toBe(2);
  });

  it('ends its threads at close; a question then, or one in flight, fails as stopping', async () => {
    const w = workers();
    await w.run(trace('W0'), new Map());
    const inFlight = w.run(trace('hang'), new Map()).catch((err: unknown) => err);
    await w.close();
    expect(w.threads).toBe(0);
    expect(((await inFlight) as LookupUnavailable).reason).toBe('the gateway is stopping');
    await expect(w.run(trace('W0'), new Map())).rejects.toThrow(/stopping/);
  });
});
