import { readFileSync } from 'node:fs';

/**
 * Finds what held the event loop in a `.cpuprofile` of the daemon: spans of
 * consecutive samples whose outermost gateway frame (dist/src/…) is the same, lasting at least
 * `minMs`, each with the leaf functions it was in. A span of one to three samples that lasts 100 ms
 * or more is a thread that could not be sampled: blocked in a system call (V8's sampler interrupts
 * it with a signal, taken only when the call returns), e.g. an fsync inside SQLite.
 *
 *   node dist/bench/cpuprofile-stalls.js <file.cpuprofile> [minMs=50]
 *
 * Get the profile with `node dist/bench/run.js --only soak --cpu-prof-dir DIR` (written when the
 * daemon stops).
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** One span: where (seconds from the profile's start), how long (ms), in what. */
export interface StallSpan {
  atSec: number;
  ms: number;
  samples: number;
  /** The outermost gateway frame, or `(garbage collector)`, `(program)` and the like. */
  task: string;
  /** Leaf functions by time in the span, the largest first. */
  leaves: { frame: string; ms: number }[];
}

const frameName = (f: CallFrame) =>
  `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(dist|node_modules)\//, '$1/')}:${f.lineNumber + 1}`;

/** The spans of at least `minMs` in a parsed `.cpuprofile`, in time order. */
export function stallSpans(profile: Profile, minMs: number): StallSpan[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const taskCache = new Map<number, string>();
  const task = (id: number): string => {
    let t = taskCache.get(id);
    if (t !== undefined) return t;
    let outer: string | undefined;
    for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) {
      const n = byId.get(x)!;
      if (n.callFrame.url.includes('/dist/src/')) outer = frameName(n.callFrame);
    }
    t = outer ?? `(${byId.get(id)!.callFrame.functionName.replace(/^\(|\)$/g, '')})`;
    taskCache.set(id, t);
    return t;
  };
  const times: number[] = [];
  let t = profile.startTime;
  for (const d of profile.timeDeltas) times.push((t += d));
  const spans: StallSpan[] = [];
  let a = 0;
  for (let i = 1; i <= profile.samples.length; i++) {
    if (i < profile.samples.length && task(profile.samples[i]!) === task(profile.samples[a]!))
      continue;
    // From the sample before the span's first (when the thread was last seen elsewhere) to its last.
    const ms = (times[i - 1]! - (times[a - 1] ?? times[a]!)) / 1000;
    const name = task(profile.samples[a]!);
    if (ms >= minMs && name !== '(idle)') {
      const leaves = new Map<string, number>();
      for (let j = a; j < i; j++) {
        const leaf = frameName(byId.get(profile.samples[j]!)!.callFrame);
        leaves.set(leaf, (leaves.get(leaf) ?? 0) + profile.timeDeltas[j]! / 1000);
      }
      spans.push({
        atSec: (times[a]! - profile.startTime) / 1e6,
        ms,
        samples: i - a,
        task: name,
        leaves: [...leaves]
          .sort((x, y) => y[1] - x[1])
          .map(([frame, leafMs]) => ({ frame, ms: leafMs })),
      });
    }
    a = i;
  }
  return spans;
}

if (process.argv[1]?.endsWith('cpuprofile-stalls.js')) {
  const [file, min] = process.argv.slice(2);
  if (!file)
    throw new Error('usage: node dist/bench/cpuprofile-stalls.js <file.cpuprofile> [minMs]');
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const spans = stallSpans(profile, Number(min ?? 50));
  const byTask = new Map<string, number>();
  for (const s of spans) byTask.set(s.task, (byTask.get(s.task) ?? 0) + 1);
  process.stdout.write(
    `${spans.length} spans of ${Number(min ?? 50)} ms or more; by task: ${JSON.stringify(Object.fromEntries(byTask))}\n`,
  );
  for (const s of spans) {
    const leaves = s.leaves
      .slice(0, 3)
      .map((l) => `${l.frame} ${l.ms.toFixed(0)} ms`)
      .join('; ');
    process.stdout.write(
      `${s.atSec.toFixed(1)} s  ${s.ms.toFixed(0)} ms  ${s.samples} samples  ${s.task} | ${leaves}\n`,
    );
  }
}
