import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IntakeItem } from '../src/inputs/types.js';
import { startIntakePipeline } from './lib/pipeline.js';
import { runRawCeiling } from './lib/raw-ceiling.js';
import { benchConfig, benchItem } from './lib/reads.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import { median, nowMs } from './lib/system.js';
import { sqlOf } from '../test/helpers/buffer-sql.js';

/**
 * Benchmark 1, durable intake: reads through the real mapping and group commit (`Intake` +
 * `BufferStore`, SQLite WAL with synchronous=FULL on a temp file), against raw better-sqlite3
 * inserts of the very same rows into the same tables with the same pragmas, in batched
 * transactions (the ceiling). Trials alternate intake and ceiling so background load hits both alike.
 */

/** Sizes and concurrency of benchmark 1. */
export interface IntakeBenchOptions {
  /** Reads per trial. */
  reads: number;
  /** Submits in flight at once, each of `readsPerSubmit` reads (many adapters, many MQTT messages in flight). */
  concurrency: number;
  readsPerSubmit: number;
  /** Rows (reads) per transaction of the raw ceiling. */
  ceilingBatch: number;
  trials: number;
}

/** 3 trials of 100,000 reads, 1,024 single-read submits in flight (the MQTT adapter's way), 2,000 reads per raw transaction. */
export const INTAKE_DEFAULTS: IntakeBenchOptions = {
  reads: 100_000,
  concurrency: 1024,
  readsPerSubmit: 1,
  ceilingBatch: 2000,
  trials: 3,
};

interface IntakeTrial {
  readsPerSec: number;
  commits: number;
  dbPath: string;
  /** Reads by outcome (scan, noRead, duplicate, rejected). */
  outcomes: Record<string, number>;
}

/** One intake trial: `concurrency` closed-loop submitters until `reads` reads are committed. */
async function runIntake(
  dir: string,
  items: readonly IntakeItem[],
  opts: IntakeBenchOptions,
): Promise<IntakeTrial> {
  const dbPath = join(dir, 'intake.db');
  const pipeline = startIntakePipeline(dbPath, benchConfig());
  const { store, intake } = pipeline;
  let commits = 0;
  const commit = store.intake.commitIntake.bind(store.intake);
  // Counts transactions without changing them: the same method, called through.
  store.intake.commitIntake = (...args: Parameters<typeof commit>) => {
    commits++;
    commit(...args);
  };
  let next = 0;
  const producer = async () => {
    for (;;) {
      const start = next;
      if (start >= items.length) return;
      next = Math.min(items.length, start + opts.readsPerSubmit);
      await intake.submit(items.slice(start, next));
    }
  };
  const started = nowMs();
  await Promise.all(Array.from({ length: opts.concurrency }, producer));
  const elapsed = (nowMs() - started) / 1000;
  const rows = sqlOf(store)
    .prepare('SELECT outcome, count(*) AS n FROM reads GROUP BY outcome')
    .all() as { outcome: string; n: number }[];
  pipeline.close();
  const outcomes = Object.fromEntries(rows.map((r) => [r.outcome, r.n]));
  const stored = rows.reduce((a, r) => a + r.n, 0);
  if (stored !== items.length) throw new Error(`intake stored ${stored} reads of ${items.length}`);
  return { readsPerSec: items.length / elapsed, commits, dbPath, outcomes };
}

/** Runs benchmark 1. */
export async function benchIntake(
  opts: IntakeBenchOptions = INTAKE_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  // Each read its own instant, ten per millisecond, as they would arrive at 10,000 reads/s.
  const base = Date.now();
  const items = Array.from({ length: opts.reads }, (_, n) =>
    benchItem(n, new Date(base + Math.floor(n / 10))),
  );
  const rates: number[] = [];
  const ceilings: number[] = [];
  const groupSizes: number[] = [];
  let outcomes: Record<string, number> = {};
  for (let t = 0; t < opts.trials; t++) {
    const dir = mkdtempSync(join(tmpdir(), 'sg-bench-intake-'));
    try {
      const trial = await runIntake(dir, items, opts);
      rates.push(trial.readsPerSec);
      groupSizes.push(opts.reads / trial.commits);
      outcomes = trial.outcomes;
      ceilings.push(runRawCeiling(dir, trial.dbPath, opts.ceilingBatch).readsPerSec);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const rate = median(rates);
  const ceiling = median(ceilings);
  const figures: Figure[] = [
    judge({
      name: 'durable intake',
      value: rate,
      unit: 'reads/s',
      ceiling: {
        value: ceiling,
        what: `raw better-sqlite3 inserts of the same rows, ${opts.ceilingBatch} reads per transaction`,
      },
      targets: [
        { kind: 'min', of: 'ratio', value: 0.5 },
        { kind: 'min', of: 'value', value: 100_000 },
      ],
      note: `${opts.concurrency} submits of ${opts.readsPerSubmit} read(s) in flight; median of ${opts.trials} trials of ${opts.reads} reads`,
    }),
    judge({ name: 'reads per commit (intake)', value: median(groupSizes), unit: 'reads' }),
  ];
  return {
    id: 'intake',
    title: 'Durable intake (mapping + group commit, SQLite WAL synchronous=FULL)',
    figures,
    notes: [
      `intake trials: ${rates.map((r) => Math.round(r)).join(', ')} reads/s; ceiling trials: ${ceilings.map((r) => Math.round(r)).join(', ')} reads/s`,
      `goods-in reads mapped by the rules of config/example.yaml; outcomes: ${Object.entries(
        outcomes,
      )
        .map(([k, n]) => `${k} ${n}`)
        .join(', ')} (a scan is two rows: read and scan)`,
    ],
  };
}
