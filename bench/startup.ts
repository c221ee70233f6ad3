import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PACKAGE_ROOT } from '../src/paths.js';
import { BENCH_DIST, startJsonChild, track } from './lib/child.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import { exampleInputs } from './lib/reads.js';
import { median, nowMs, processCpuSecondsFine, processMemory, sleep } from './lib/system.js';
import { startPty, type Tool } from './lib/tools.js';
import {
  adaptExample,
  ENV_WORD,
  footprintRuntimes,
  libraryFloorOf,
  unitEnvironment,
  unitNodeArgs,
  type SandboxKafkaInfo,
} from './footprint.js';

/**
 * The start-up row: start to ready of the compiled daemon on the bundled runtime, started as the
 * unit starts it (its node options on the command line, its compile cache warm) and as a plain
 * `node dist/src/main.js run` (which re-executes itself with those options: two process starts),
 * with the parts of the start the daemon reports in its start-up line; then idle memory split
 * into RssAnon and RssFile for a one-serial-input site without status events and for
 * config/example.yaml, each beside the floor of the packages it loads, and which modules each loads.
 */

export interface StartupOptions {
  /** Starts per variant, alternated (the median is reported). */
  starts: number;
  /** Wait after ready before the idle memory is read, in ms. */
  settleMs: number;
  /**
   * Another build's `main.js` to time beside this one, alternately (`SG_BENCH_BEFORE_MAIN`): the
   * before of a change, copied to e.g. dist/.before/src/main.js before rebuilding.
   */
  beforeMain?: string;
}

export const STARTUP_DEFAULTS: StartupOptions = { starts: 7, settleMs: 8000 };

/** The target of start to ready, in ms. */
const READY_TARGET_MS = 300;

/** The parts of a start, as the daemon's start-up line reports them (`startup`), in ms. */
interface StartupParts {
  processMs?: number;
  loadMs?: number;
  configMs?: number;
  buildMs?: number;
  readyMs?: number;
  parts?: Record<string, number>;
}

interface Started {
  pid: number;
  readyMs: number;
  /** CPU time (all threads) the daemon used until ready, in ms: less subject to other load than the wall time. */
  cpuMs: number;
  startup: StartupParts | undefined;
  stop(): Promise<void>;
}

/** Spawns the daemon; resolves once /healthz answers (any status) and the start-up line is read. */
async function startDaemon(
  node: string,
  args: string[],
  configFile: string,
  env: Record<string, string>,
): Promise<Started> {
  const port = /listen: 127\.0\.0\.1:(\d+)/.exec(readFileSync(configFile, 'utf8'))?.[1];
  const url = `http://127.0.0.1:${port}/healthz`;
  const spawnedAt = nowMs();
  const child = track(
    spawn(node, [...args, 'run', '--config', configFile], {
      cwd: tmpdir(),
      env: { ...env, PATH: process.env.PATH ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let text = '';
  let startup: StartupParts | undefined;
  let seen = false;
  const onOutput = (t: string) => {
    text += t;
    if (!seen) {
      const line = text.split('\n').find((l) => l.includes('"msg":"scan-gateway started"'));
      if (line) {
        seen = true;
        startup = (JSON.parse(line) as { startup?: StartupParts }).startup;
      }
    }
    if (text.length > 1_000_000) text = text.slice(-100_000);
  };
  child.stdout!.setEncoding('utf8').on('data', onOutput);
  child.stderr!.setEncoding('utf8').on('data', onOutput);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`the daemon exited with ${child.exitCode}: ${text.slice(-2000)}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the daemon did not answer ${url} within 30 s: ${text.slice(-2000)}`);
    }
    const ok = await fetch(url).then(
      async (r) => {
        await r.arrayBuffer();
        return true;
      },
      () => false,
    );
    if (ok) break;
    await sleep(2);
  }
  const readyMs = nowMs() - spawnedAt;
  const cpuMs = (processCpuSecondsFine(child.pid!) ?? NaN) * 1000;
  while (!seen && Date.now() < deadline) await sleep(5);
  return { pid: child.pid!, readyMs, cpuMs, startup, stop };
}

/** config/example.yaml cut to its serial scanner alone, without status events. */
async function oneSerialConfig(dir: string, sandboxUrl: string, tools: Tool[]): Promise<string> {
  const serial = exampleInputs().find((i) => i.type === 'serial');
  if (!serial) throw new Error('config/example.yaml has no serial input');
  const pty = await startPty(dir, `one-${serial.id}`);
  tools.push(pty);
  const { freePort } = await import('./lib/system.js');
  // The example's site, upstream and scanner; none of its rules, containers or other inputs.
  const text = [
    `site: { id: plant-1-hall-3, timezone: Europe/Berlin }`,
    `upstream:`,
    `  baseUrl: ${sandboxUrl}`,
    `  authUrl: ${sandboxUrl}`,
    `  clientId: demo-client`,
    `  clientSecretFile: ${join(PACKAGE_ROOT, 'config/demo-client-secret')}`,
    `buffer: { path: ${join(dir, 'one-serial.db')} }`,
    `http: { listen: 127.0.0.1:${await freePort()} }`,
    `dcps:`,
    `  - { key: ${String(serial.dcp)}, kind: goodsIn, productModelKey: PACK-A, supplierKey: SUP-0042 }`,
    `inputs:`,
    `  - ${JSON.stringify({ ...serial, path: pty.device })}`,
    '',
  ].join('\n');
  const file = join(dir, 'one-serial.yaml');
  writeFileSync(file, text);
  return file;
}

/** The packages a module list names (`…/node_modules/<name>/…`, scoped names whole), sorted. */
export function packagesOf(urls: readonly string[]): string[] {
  const names = new Set<string>();
  for (const url of urls) {
    const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (m) names.add(m[1]!);
  }
  return [...names].sort();
}

/** Idle memory and the modules loaded, of one configuration. */
interface IdleMeasure {
  mem: ReturnType<typeof processMemory>;
  packages: string[];
  ownModules: number;
  allModules: number;
}

async function measureIdle(
  node: string,
  main: string,
  nodeArgs: string[],
  env: Record<string, string>,
  configFile: string,
  dir: string,
  settleMs: number,
): Promise<IdleMeasure> {
  // Memory without the listing hook, then the listing in a start of its own.
  const plain = await startDaemon(node, [...nodeArgs, main], configFile, env);
  let mem: ReturnType<typeof processMemory>;
  try {
    await sleep(settleMs);
    mem = processMemory(plain.pid);
  } finally {
    await plain.stop();
  }
  const listFile = join(dir, 'modules.txt');
  rmSync(listFile, { force: true });
  const hook = pathToFileURL(join(BENCH_DIST, 'lib/module-list.js')).href;
  const listed = await startDaemon(node, [...nodeArgs, `--import=${hook}`, main], configFile, {
    ...env,
    SG_BENCH_MODULE_LIST: listFile,
  });
  await sleep(2000);
  await listed.stop();
  const urls = existsSync(listFile)
    ? readFileSync(listFile, 'utf8').split('\n').filter(Boolean)
    : [];
  // The bundle's chunks hold packages too (dist/src/bundle/packages.json, written by the build).
  const chunkPackages = join(dirname(main), 'bundle', 'packages.json');
  const inChunks = existsSync(chunkPackages)
    ? (JSON.parse(readFileSync(chunkPackages, 'utf8')) as Record<string, string[]>)
    : {};
  const bundled = urls.flatMap((u) => {
    const m = /\/bundle\/([^/]+\.js)$/.exec(u);
    return m ? (inChunks[m[1]!] ?? []) : [];
  });
  return {
    mem,
    packages: [...new Set([...packagesOf(urls), ...bundled])].sort(),
    ownModules: urls.filter((u) => u.startsWith(pathToFileURL(dirname(main)).href + '/')).length,
    allModules: urls.filter((u) => u.startsWith('file:')).length,
  };
}

const round = (x: number | undefined) => (x === undefined ? '?' : String(Math.round(x)));

/** Runs the start-up row. */
export async function benchStartup(
  opts: StartupOptions = STARTUP_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-startup-'));
  const tools: Tool[] = [];
  const sandbox = startJsonChild('sandbox-child.js', ['{}']);
  try {
    const { url, kafka } = await sandbox.next<{ url: string; kafka?: SandboxKafkaInfo }>(
      20_000,
      'the sandbox to listen',
    );
    const example = await adaptExample(dir, url, tools, kafka);
    const oneSerial = await oneSerialConfig(dir, url, tools);
    const runtime = footprintRuntimes()[0]!;
    const words = unitNodeArgs();
    const nodeArgs = words.filter((w) => !ENV_WORD.test(w));
    const unitEnv: Record<string, string> = {
      ...unitEnvironment(),
      // The unit's CacheDirectory=, where the daemon keeps its compile cache.
      CACHE_DIRECTORY: join(dir, 'cache'),
    };
    const main = join(PACKAGE_ROOT, 'dist/src/main.js');
    // SG_BENCH_CPU_PROF_DIR: a CPU profile of each start as the unit starts it, 0.1-ms samples
    // (the profiler slows the start: its times are for the shares, not the figure).
    const profDir = process.env.SG_BENCH_CPU_PROF_DIR;
    const profileArgs = profDir
      ? ['--cpu-prof', '--cpu-prof-interval=100', `--cpu-prof-dir=${profDir}`]
      : [];
    const variants: { name: string; args: string[]; env: Record<string, string> }[] = [
      { name: 'as the unit starts it', args: [...nodeArgs, ...profileArgs, main], env: unitEnv },
      {
        name: 'plain node dist/src/main.js run (re-executes itself)',
        args: [main],
        env: { CACHE_DIRECTORY: join(dir, 'cache') },
      },
      ...(opts.beforeMain
        ? [
            {
              name: `as the unit starts it, before (${opts.beforeMain})`,
              args: [...nodeArgs, opts.beforeMain],
              env: unitEnv,
            },
          ]
        : []),
    ];
    // One start each to fill the compile cache (the unit's first start after an install), untimed.
    const cold: number[] = [];
    for (const v of variants) {
      const s = await startDaemon(runtime.node, v.args, example, v.env);
      cold.push(s.readyMs);
      await s.stop();
    }
    const times = variants.map(() => [] as number[]);
    const cpus = variants.map(() => [] as number[]);
    const parts: StartupParts[] = [];
    for (let i = 0; i < opts.starts; i++) {
      for (const [k, v] of variants.entries()) {
        const s = await startDaemon(runtime.node, v.args, example, v.env);
        times[k]!.push(s.readyMs);
        cpus[k]!.push(s.cpuMs);
        if (k === 0 && s.startup) parts.push(s.startup);
        await s.stop();
      }
    }
    const medianOf = (pick: (p: StartupParts) => number | undefined) =>
      median(parts.map(pick).filter((x): x is number => x !== undefined));
    const partNames = [...new Set(parts.flatMap((p) => Object.keys(p.parts ?? {})))];
    const profile = [
      `process start to the first own module ${round(medianOf((p) => p.processMs))} ms`,
      `loading the daemon's modules ${round(medianOf((p) => p.loadMs))} ms`,
      `configuration and secrets ${round(medianOf((p) => p.configMs))} ms`,
      `building the parts ${round(medianOf((p) => p.buildMs))} ms`,
      `starting them: ${partNames.map((n) => `${n} ${medianOf((p) => p.parts?.[n]).toFixed(1)}`).join(', ')} ms`,
      `ready on the daemon's own clock (since its process started) ${round(medianOf((p) => p.readyMs))} ms`,
    ].join('; ');

    const idleOf = (entry: string, config: string) =>
      measureIdle(runtime.node, entry, nodeArgs, unitEnv, config, dir, opts.settleMs);
    const serialIdle = await idleOf(main, oneSerial);
    // The before's idle memory too, each measured right after this build's.
    const serialIdleBefore = opts.beforeMain ? await idleOf(opts.beforeMain, oneSerial) : undefined;
    const exampleIdle = await idleOf(main, example);
    const exampleIdleBefore = opts.beforeMain ? await idleOf(opts.beforeMain, example) : undefined;
    // The floor imports the gateway's own dependencies among them; the rest are theirs.
    const deps = Object.keys(
      (
        JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
          dependencies: Record<string, string>;
        }
      ).dependencies,
    );
    const direct = exampleIdle.packages.filter((p) => deps.includes(p));
    const floor = libraryFloorOf(runtime.node, direct, nodeArgs, unitEnvironment());
    const serialDirect = serialIdle.packages.filter((p) => deps.includes(p));
    const serialFloor = libraryFloorOf(runtime.node, serialDirect, nodeArgs, unitEnvironment());
    // The runtime alone: node's executable, ICU and V8's heap, nothing imported.
    const bareFloor = libraryFloorOf(runtime.node, [], nodeArgs, unitEnvironment());
    const memNote = (m: IdleMeasure) =>
      `RssAnon ${m.mem?.anonMiB.toFixed(1)} MiB + RssFile ${m.mem?.fileMiB.toFixed(1)} MiB, ${opts.settleMs / 1000} s after ready; ${m.allModules} modules, ${m.ownModules} of them the gateway's`;
    const figures: Figure[] = [
      ...variants.map((v, k) =>
        judge({
          name: `start to ready, ${v.name}`,
          value: median(times[k]!),
          unit: 'ms',
          ...(k === 0
            ? { targets: [{ kind: 'max' as const, of: 'value' as const, value: READY_TARGET_MS }] }
            : {}),
          note: `median of ${opts.starts} alternated starts, compile cache warm: ${times[k]!.map(Math.round).join(', ')} ms; the first start (cache cold) ${Math.round(cold[k]!)} ms`,
        }),
      ),
      ...variants.map((v, k) =>
        judge({
          name: `CPU until ready, ${v.name}`,
          value: median(cpus[k]!),
          unit: 'ms',
          note: `all threads of the (last) process, from /proc/PID/task/*/schedstat: ${cpus[k]!.map(Math.round).join(', ')} ms`,
        }),
      ),
      judge({
        name: 'idle RSS, one serial input, no status events',
        value: serialIdle.mem?.rssMiB ?? NaN,
        unit: 'MiB',
        targets: [{ kind: 'max', of: 'value', value: 70 }],
        note: memNote(serialIdle),
      }),
      judge({
        name: 'RSS floor of the packages one serial input loads',
        value: serialFloor.rssMiB,
        unit: 'MiB',
        ceiling: { value: 70, what: 'the one-serial idle target (70 MiB)' },
        note: `a bare node with the unit's options importing ${serialDirect.join(', ')}: RssAnon ${serialFloor.anonMiB.toFixed(1)} + RssFile ${serialFloor.fileMiB.toFixed(1)} MiB; the runtime alone, nothing imported: ${bareFloor.rssMiB.toFixed(1)} MiB (RssAnon ${bareFloor.anonMiB.toFixed(1)} + RssFile ${bareFloor.fileMiB.toFixed(1)})`,
      }),
      judge({
        name: 'idle RssAnon, one serial input',
        value: serialIdle.mem?.anonMiB ?? NaN,
        unit: 'MiB',
      }),
      judge({
        name: 'idle RssFile, one serial input',
        value: serialIdle.mem?.fileMiB ?? NaN,
        unit: 'MiB',
      }),
      judge({
        name: 'idle RSS, config/example.yaml',
        value: exampleIdle.mem?.rssMiB ?? NaN,
        unit: 'MiB',
        ceiling: {
          value: floor.rssMiB + 15,
          what: 'the floor of the packages it loads + 15 MiB',
        },
        targets: [{ kind: 'atMost', of: 'ratio', value: 1 }],
        note: memNote(exampleIdle),
      }),
      judge({
        name: 'idle RssAnon, config/example.yaml',
        value: exampleIdle.mem?.anonMiB ?? NaN,
        unit: 'MiB',
      }),
      judge({
        name: 'idle RssFile, config/example.yaml',
        value: exampleIdle.mem?.fileMiB ?? NaN,
        unit: 'MiB',
      }),
      ...(serialIdleBefore && exampleIdleBefore
        ? [
            judge({
              name: `idle RSS, one serial input, before (${opts.beforeMain})`,
              value: serialIdleBefore.mem?.rssMiB ?? NaN,
              unit: 'MiB',
              note: memNote(serialIdleBefore),
            }),
            judge({
              name: `idle RSS, config/example.yaml, before (${opts.beforeMain})`,
              value: exampleIdleBefore.mem?.rssMiB ?? NaN,
              unit: 'MiB',
              note: memNote(exampleIdleBefore),
            }),
          ]
        : []),
      judge({
        name: 'RSS floor of the packages config/example.yaml loads',
        value: floor.rssMiB,
        unit: 'MiB',
        note: `a bare node with the unit's options importing ${direct.join(', ')}, nothing started, after a full GC: RssAnon ${floor.anonMiB.toFixed(1)} + RssFile ${floor.fileMiB.toFixed(1)} MiB`,
      }),
    ];
    return {
      id: 'startup',
      title: `Start-up and idle memory by configuration, on Node.js ${runtime.version}${runtime.bundled ? ' (bundled)' : ''}`,
      figures,
      notes: [
        `profile of a start as the unit starts it (medians, from the daemon's start-up line): ${profile}`,
        `one serial input loads ${serialIdle.packages.length} packages: ${serialIdle.packages.join(', ')}`,
        `config/example.yaml loads ${exampleIdle.packages.length} packages: ${exampleIdle.packages.join(', ')}`,
        `node options: ${nodeArgs.join(' ')}; environment: ${Object.entries(unitEnvironment())
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')} and CACHE_DIRECTORY (the unit's CacheDirectory=)`,
      ],
    };
  } finally {
    await sandbox.stop();
    for (const t of tools) await t.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
