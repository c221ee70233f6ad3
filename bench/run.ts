import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { PACKAGE_ROOT } from '../src/paths.js';
import { benchBigFile, BIGFILE_DEFAULTS } from './bigfile.js';
import { benchBulkIngest, BULK_INGEST_DEFAULTS } from './bulk-ingest.js';
import { benchDrain, benchFill, DRAIN_DEFAULTS } from './drain.js';
import { benchFootprint, FOOTPRINT_DEFAULTS } from './footprint.js';
import { benchIntake, INTAKE_DEFAULTS } from './intake.js';
import { benchItems, ITEMS_DEFAULTS } from './items.js';
import { benchHandshakeFlood, HANDSHAKE_FLOOD_DEFAULTS } from './handshake-flood.js';
import { benchLookups, LOOKUPS_DEFAULTS } from './lookups.js';
import { benchMqtt, MQTT_DEFAULTS } from './mqtt.js';
import { benchProbes, PROBES_DEFAULTS } from './probes.js';
import { benchRecovery, RECOVERY_DEFAULTS } from './recovery.js';
import { benchSftp, SFTP_DEFAULTS } from './sftp.js';
import { benchSoak, SOAK_DEFAULTS } from './soak.js';
import { benchStatus, STATUS_DEFAULTS } from './status.js';
import { benchStartup, STARTUP_DEFAULTS } from './startup.js';
import { benchOutage, OUTAGE_DEFAULTS } from './outage.js';
import { benchVerdict, VERDICT_DEFAULTS } from './verdict.js';
import {
  formatMarkdown,
  formatTable,
  writeReport,
  type BenchReport,
  type BenchResult,
} from './lib/report.js';
import { machineInfo, nowMs, othersBusyMeter, sampleBackground } from './lib/system.js';

/**
 * `npm run bench`: the benchmark suite. Runs each benchmark with its ceiling measured in
 * the same run, prints a table and writes bench/results/latest.json. Not part of `npm test`. The
 * options are {@link USAGE} (`--help`). Exits 1 when a benchmark could not run (a missed target is
 * a result, not a failure), 2 on a command line it cannot follow.
 */

const ALL = [
  'intake',
  'mqtt',
  'mqtt-fair',
  'drain',
  'fill',
  'footprint',
  'startup',
  'status',
  'bigfile',
  'sftp',
  'items',
  'lookups',
  'probes',
  'handshake-flood',
  'bulk-ingest',
  'recovery',
  'verdict',
] as const;
/** Benchmarks run only when named in `--only`: the soak takes 30 minutes, the outage up to 30. */
const NAMED_ONLY = ['soak', 'outage'] as const;
const KNOWN = [...ALL, ...NAMED_ONLY];
type BenchId = (typeof KNOWN)[number];

const USAGE = `Usage:
  node dist/bench/run.js [--only intake,mqtt,mqtt-fair,drain,fill,footprint,startup,status,bigfile,sftp,items,lookups,probes,handshake-flood,bulk-ingest,recovery,verdict] [--quick] [--out FILE]
                         [--node-args='--max-semi-space-size=1 …'] [--no-status-events]
  node dist/bench/run.js --only soak [--minutes N] [--heap-snapshots] [--prefill SCANS] [--cpu-prof-dir DIR] [--quick]
  node dist/bench/run.js --only outage [--scans N] [--quick]
  node dist/bench/run.js --markdown [FILE]

Runs each benchmark with its ceiling measured in the same run, prints a table and writes FILE
(default bench/results/latest.json). Run on a quiet machine: each benchmark prints how busy the
other processes kept it. Figures, targets and how each is measured: docs/performance.md.

  --only LIST        benchmarks to run (default all but soak)
  --quick            smaller sizes for a smoke run (figures not comparable; the soak lasts 3 minutes)
  --out FILE         where to write the results (JSON)
  --node-args ARGS   the daemon's node options in the footprint and bigfile benchmarks (default: the unit's ExecStart)
  --no-status-events the footprint benchmark without the example's status-event reader (no Kafka client)
  --minutes N        the soak's length (default 30)
  --heap-snapshots   the soak writes two heap snapshots of the daemon (after the warm-up, at the end)
  --prefill SCANS    the soak starts on a buffer of SCANS delivered scans (900000: the end of a 30-minute soak)
  --cpu-prof-dir DIR the soak writes a CPU profile of the daemon into DIR
  --scans N          the outage's backlog (default 10000000; also SG_BENCH_OUTAGE_SCANS)
  --markdown [FILE]  print FILE (default the latest results) as a Markdown table
  --help             this text
`;

/** A command line this runner cannot follow: the reason and the usage on stderr, exit code 2. */
function usageError(reason: string): never {
  process.stderr.write(`${reason}\n\n${USAGE}`);
  process.exit(2);
}

function parseCommandLine(): ReturnType<typeof parseCommandLineStrict> {
  try {
    return parseCommandLineStrict();
  } catch (err) {
    return usageError((err as Error).message);
  }
}

function parseCommandLineStrict() {
  return parseArgs({
    options: {
      help: { type: 'boolean', default: false },
      only: { type: 'string' },
      quick: { type: 'boolean', default: false },
      out: { type: 'string' },
      markdown: { type: 'boolean', default: false },
      'node-args': { type: 'string' },
      minutes: { type: 'string' },
      'heap-snapshots': { type: 'boolean', default: false },
      prefill: { type: 'string' },
      'cpu-prof-dir': { type: 'string' },
      'no-status-events': { type: 'boolean', default: false },
      scans: { type: 'string' },
    },
    allowPositionals: true,
  });
}

const { values, positionals } = parseCommandLine();
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const quick = values.quick ?? false;
const selected = (values.only?.split(',').map((s) => s.trim()) ?? [...ALL]) as BenchId[];
for (const id of selected)
  if (!KNOWN.includes(id)) usageError(`unknown benchmark ${id}; known: ${KNOWN.join(', ')}`);
const minutes = values.minutes === undefined ? undefined : Number(values.minutes);
if (minutes !== undefined && !(Number.isInteger(minutes) && minutes >= 1))
  usageError(`--minutes must be a whole number of minutes, at least 1 (got ${values.minutes})`);
if (
  values.prefill !== undefined &&
  !(Number.isInteger(Number(values.prefill)) && Number(values.prefill) >= 0)
)
  usageError(`--prefill must be a whole number of scans (got ${values.prefill})`);
const scansText = values.scans ?? process.env.SG_BENCH_OUTAGE_SCANS;
const outageScans = scansText === undefined ? undefined : Number(scansText);
if (outageScans !== undefined && !(Number.isInteger(outageScans) && outageScans >= 1000))
  usageError(`--scans must be a whole number of scans, at least 1000 (got ${scansText})`);
const out = values.out ?? join(PACKAGE_ROOT, 'bench/results/latest.json');

const sizes = {
  intake: quick ? { ...INTAKE_DEFAULTS, reads: 30_000, trials: 1 } : INTAKE_DEFAULTS,
  mqtt: quick ? { ...MQTT_DEFAULTS, messages: 10_000, latencySeconds: 3 } : MQTT_DEFAULTS,
  drain: quick ? { scans: 50_000, fillScans: 80_000 } : DRAIN_DEFAULTS,
  footprint: {
    ...(quick ? { starts: 1, settleMs: 1000, idleMs: 2000, steadyMs: 3000 } : FOOTPRINT_DEFAULTS),
    ...(values['node-args'] !== undefined
      ? { nodeArgs: values['node-args'].split(/\s+/).filter(Boolean) }
      : {}),
    ...(values['no-status-events'] ? { statusEvents: false } : {}),
  },
  startup: {
    ...(quick ? { starts: 2, settleMs: 3000 } : STARTUP_DEFAULTS),
    ...(process.env.SG_BENCH_BEFORE_MAIN ? { beforeMain: process.env.SG_BENCH_BEFORE_MAIN } : {}),
  },
  status: quick
    ? { ...STATUS_DEFAULTS, scans: 100_000, rejected: 1000, calls: 10 }
    : STATUS_DEFAULTS,
  bigfile: {
    ...(quick ? { lines: 100_000 } : BIGFILE_DEFAULTS),
    ...(values['node-args'] !== undefined
      ? { nodeArgs: values['node-args'].split(/\s+/).filter(Boolean) }
      : {}),
  },
  sftp: quick ? { batchMiB: 10, batches: 2 } : SFTP_DEFAULTS,
  items: quick ? { scans: 200_000, lookups: 50 } : ITEMS_DEFAULTS,
  lookups: quick ? { ...LOOKUPS_DEFAULTS, seconds: 3 } : LOOKUPS_DEFAULTS,
  probes: quick ? { ...PROBES_DEFAULTS, seconds: 3, scans: 50_000 } : PROBES_DEFAULTS,
  'handshake-flood': quick ? { ...HANDSHAKE_FLOOD_DEFAULTS, seconds: 3 } : HANDSHAKE_FLOOD_DEFAULTS,
  bulkIngest: quick ? { ...BULK_INGEST_DEFAULTS, seconds: 3 } : BULK_INGEST_DEFAULTS,
  recovery: quick ? { ...RECOVERY_DEFAULTS, scans: 5000, burstMs: 5000 } : RECOVERY_DEFAULTS,
  outage: {
    ...OUTAGE_DEFAULTS,
    ...(quick ? { scans: 100_000, outageSec: 10, settleSec: 10 } : {}),
    ...(outageScans !== undefined ? { scans: outageScans } : {}),
  },
  verdict: quick ? { ...VERDICT_DEFAULTS, reads: 150 } : VERDICT_DEFAULTS,
  soak: {
    ...SOAK_DEFAULTS,
    minutes: minutes ?? (quick ? 3 : SOAK_DEFAULTS.minutes),
    heapSnapshots: values['heap-snapshots'] ?? false,
    ...(values.prefill !== undefined ? { prefill: Number(values.prefill) } : {}),
    ...(values['cpu-prof-dir'] !== undefined ? { cpuProfDir: values['cpu-prof-dir'] } : {}),
  },
};

const runners: Record<BenchId, () => Promise<Omit<BenchResult, 'durationSec' | 'background'>>> = {
  intake: () => benchIntake(sizes.intake),
  mqtt: () => benchMqtt(sizes.mqtt),
  'mqtt-fair': () => benchMqtt({ ...sizes.mqtt, fair: true }),
  drain: () => benchDrain(sizes.drain),
  fill: () => benchFill(sizes.drain),
  footprint: () => benchFootprint(sizes.footprint),
  startup: () => benchStartup(sizes.startup),
  status: () => benchStatus(sizes.status),
  bigfile: () => benchBigFile(sizes.bigfile),
  sftp: () => benchSftp(sizes.sftp),
  items: () => benchItems(sizes.items),
  lookups: () => benchLookups(sizes.lookups),
  probes: () => benchProbes(sizes.probes),
  'handshake-flood': () => benchHandshakeFlood(sizes['handshake-flood']),
  'bulk-ingest': () => benchBulkIngest(sizes.bulkIngest),
  recovery: () => benchRecovery(sizes.recovery),
  verdict: () => benchVerdict(sizes.verdict),
  soak: () => benchSoak(sizes.soak),
  outage: () => benchOutage(sizes.outage),
};

const TITLES: Record<BenchId, string> = {
  intake: 'Durable intake',
  mqtt: 'End-to-end intake over MQTT',
  'mqtt-fair': 'End-to-end intake over MQTT, the broker and the publisher on their own core',
  drain: 'Drain',
  fill: 'Batch fill',
  footprint: 'Footprint',
  startup: 'Start-up and idle memory by configuration',
  status: 'Health refresh on a full buffer',
  bigfile: 'One big file',
  sftp: 'SFTP delivery of large batches',
  items: 'Item lookup (10 million scans)',
  lookups: 'Probes and ingest beside 100 wide item lookups',
  probes: 'Probes and intake while 8 connections pipeline probes',
  'handshake-flood': 'Probes during a slow-handshake flood from several addresses',
  'bulk-ingest': 'Probes and TCP reads beside two clients posting 10,000-read bodies',
  recovery: 'Recovery after a fault burst (pre-signed)',
  verdict: 'The scanner hears the verdict: read to ACK/NAK (ackOn: verdict)',
  soak: 'Soak (30 minutes at 500 reads/s over MQTT)',
  outage: 'A weekend without the cloud: a 10 M backlog drained while the line runs',
};

// Ctrl-C: exit through 'exit', whose handler (lib/child.ts) kills the brokers, sandboxes and ptys started.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

async function main(): Promise<number> {
  if (values.markdown) {
    const report = JSON.parse(readFileSync(positionals[0] ?? out, 'utf8')) as BenchReport;
    process.stdout.write(`${formatMarkdown(report.results)}\n`);
    return 0;
  }
  const suiteStarted = nowMs();
  const machine = machineInfo();
  process.stderr.write(
    `bench: ${machine.cpuModel}, ${machine.cores} cores, ${machine.memTotalMiB} MiB, node ${machine.node}${quick ? ' (quick)' : ''}\n`,
  );
  const results: BenchResult[] = [];
  for (const id of selected) {
    const background = await sampleBackground(1000);
    process.stderr.write(
      `bench: ${id} (machine ${background.busyPct}% busy before, load ${background.loadavg1}) … `,
    );
    const started = nowMs();
    const others = othersBusyMeter();
    let result: BenchResult;
    try {
      result = { ...(await runners[id]()), background, durationSec: 0 };
    } catch (err) {
      result = {
        id,
        title: TITLES[id],
        figures: [],
        notes: [],
        background,
        durationSec: 0,
        error: err instanceof Error ? err.message : String(err),
      };
    }
    result.durationSec = Math.round((nowMs() - started) / 100) / 10;
    background.othersDuringPct = Math.round(others());
    background.loadavg1After = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
    const load = `other processes kept ${background.othersDuringPct}% of the machine busy meanwhile`;
    process.stderr.write(
      result.error
        ? `failed after ${result.durationSec} s (${load}): ${result.error}\n`
        : `${result.durationSec} s (${load})\n`,
    );
    results.push(result);
  }
  const report: BenchReport = {
    date: new Date().toISOString(),
    machine,
    durationSec: Math.round((nowMs() - suiteStarted) / 1000),
    options: { quick, selected, sizes },
    results,
  };
  writeReport(out, report);
  process.stdout.write(`\n${formatTable(results)}\n\n`);
  for (const r of results) {
    const b = r.background;
    if (b)
      process.stdout.write(
        `  ${r.id}: ran ${r.durationSec} s; other processes kept ${b.othersDuringPct ?? '?'}% of the ${machine.cores} cores busy meanwhile (load ${b.loadavg1} before, ${b.loadavg1After ?? '?'} after)\n`,
      );
    for (const note of [
      ...r.figures.filter((f) => f.note).map((f) => `${f.name}: ${f.note}`),
      ...r.notes,
    ])
      process.stdout.write(`  ${r.id}: ${note}\n`);
  }
  process.stdout.write(`\nwritten ${out} (suite ${report.durationSec} s)\n`);
  return results.some((r) => r.error) ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
