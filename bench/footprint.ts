import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Socket } from 'node:net';
import { PACKAGE_ROOT } from '../src/paths.js';
import { startJsonChild, track } from './lib/child.js';
import { judge, type BenchResult, type Figure } from './lib/report.js';
import {
  contextSwitches,
  freePort,
  median,
  nowMs,
  processCpuSeconds,
  processCpuSecondsFine,
  processMemory,
  sleep,
} from './lib/system.js';
import { adaptedExampleText, exampleInputs, type ConfigEdits } from './lib/reads.js';
import { startMosquitto, startPty, type Tool } from './lib/tools.js';

/**
 * Benchmark 5, footprint: the compiled daemon (`node dist/src/main.js run --config …`) with
 * config/example.yaml adapted to this machine: its serial scanners become socat pseudo-terminals,
 * its folders and buffer a temp folder, its upstream the sandbox (in a process of its own, so the
 * daemon's memory is its own). Measures the time from spawn to ready, then memory and CPU at idle.
 */

/** Repetitions and durations of benchmark 5. */
export interface FootprintOptions {
  /** Starts measured for the start-up time (the last one stays up for the idle measurement). */
  starts: number;
  /** Wait after ready before the idle measurement, in ms. */
  settleMs: number;
  /** Length of the idle measurement, in ms. */
  idleMs: number;
  /**
   * Length of the steady idle measurement after it, in ms (0: none): CPU and wake-ups over three
   * equal parts, their median reported. V8's memory reducer runs its mark-compacts once, some
   * 10 to 30 s after the start (when the Kafka client's import is over), about 200 ms of CPU:
   * in a single 10-s window it reads as 2 % of a core of "idle" (docs/performance.md, section 5).
   */
  steadyMs?: number;
  /**
   * Node options of the daemon; by default those of systemd/scan-gateway.service's ExecStart
   * ({@link unitNodeArgs}), so the figures are those of the installed service. Words of the form
   * `NAME=value` (an upper-case name) are not node options but environment variables of the
   * daemon, set over the unit's `Environment=` (`--node-args='MALLOC_ARENA_MAX=1 --max-semi-space-size=2'`).
   */
  nodeArgs?: string[];
  /**
   * Whether the example's status-event reader stays on (default true): off, the Kafka client is
   * never imported, so the figures are those of a site that follows its batches by polling.
   */
  statusEvents?: boolean;
}

/**
 * The node options on systemd/scan-gateway.service's ExecStart line (the words between
 * `/usr/bin/node` and the script), e.g. `['--max-semi-space-size=1']`.
 */
export function unitNodeArgs(): string[] {
  const unit = readFileSync(join(PACKAGE_ROOT, 'systemd/scan-gateway.service'), 'utf8');
  const words = /^ExecStart=(.*)$/m.exec(unit)?.[1]?.trim().split(/\s+/) ?? [];
  const script = words.findIndex((w) => w.endsWith('/main.js'));
  return script > 1 ? words.slice(1, script) : [];
}

/**
 * The variables of systemd/scan-gateway.service's `Environment=` lines (e.g. `MALLOC_ARENA_MAX=2`),
 * which the daemon gets in the benchmark as it does under systemd.
 */
export function unitEnvironment(): Record<string, string> {
  const unit = readFileSync(join(PACKAGE_ROOT, 'systemd/scan-gateway.service'), 'utf8');
  const env: Record<string, string> = {};
  for (const [, line] of unit.matchAll(/^Environment=(.*)$/gm)) {
    // systemd's syntax: space-separated assignments, each optionally in double quotes.
    for (const m of line!.matchAll(/"([^"]*)"|(\S+)/g)) {
      const word = m[1] ?? m[2]!;
      const eq = word.indexOf('=');
      if (eq > 0) env[word.slice(0, eq)] = word.slice(eq + 1);
    }
  }
  return env;
}

/** An environment assignment among `--node-args` words (`MALLOC_ARENA_MAX=1`), not a node option. */
export const ENV_WORD = /^[A-Z_][A-Z0-9_]*=/;

/** 3 starts; idle measured over 10 s, 5 s after ready, then steady idle over 30 s. */
export const FOOTPRINT_DEFAULTS: FootprintOptions = {
  starts: 3,
  settleMs: 5000,
  idleMs: 10_000,
  steadyMs: 30_000,
};

/**
 * config/example.yaml with everything outside this machine replaced by a local stand-in: serial
 * scanners by socat ptys, the MQTT brokers by one mosquitto (in the clear, anonymous), a TCP
 * reader the gateway connects to by a local server that accepts and stays silent, listening
 * ports by free ports on 127.0.0.1, folders and the buffer by a temp folder, the service by the
 * sandbox, the ingest token by a temp file, the health page by a free port, and the status-event
 * brokers by the sandbox's Kafka broker when `kafka` is given (its CA in a temp file, the demo
 * client's topic); without it they stay the example's, which cannot be reached from here; with
 * `'off'` the example's status-event reader is removed.
 */
export async function adaptExample(
  dir: string,
  sandboxUrl: string,
  tools: Tool[],
  kafka?: SandboxKafkaInfo | 'off',
): Promise<string> {
  const edits: ConfigEdits = [
    [['upstream', 'baseUrl'], sandboxUrl],
    [['upstream', 'authUrl'], sandboxUrl],
    [['upstream', 'clientId'], 'demo-client'],
    [['upstream', 'clientSecretFile'], join(PACKAGE_ROOT, 'config/demo-client-secret')],
    [['buffer', 'path'], join(dir, 'buffer.db')],
    [['http', 'listen'], `127.0.0.1:${await freePort()}`],
  ];
  if (kafka === 'off') {
    edits.push([['upstream', 'statusEvents'], undefined]);
  } else if (kafka) {
    const caFile = join(dir, 'kafka-ca.pem');
    writeFileSync(caFile, kafka.caPem);
    edits.push(
      [['upstream', 'statusEvents', 'bootstrapServers'], [kafka.bootstrapServers]],
      [['upstream', 'statusEvents', 'topic'], kafka.topic],
      [['upstream', 'statusEvents', 'caFile'], caFile],
    );
  }
  let broker: (Tool & { url: string }) | undefined;
  const inputs = exampleInputs();
  for (const [i, input] of inputs.entries()) {
    const at = (key: string): (string | number)[] => ['inputs', i, key];
    switch (input.type) {
      case 'serial': {
        const pty = await startPty(dir, input.id);
        tools.push(pty);
        edits.push([at('path'), pty.device]);
        break;
      }
      case 'files': {
        const folder = join(dir, `inbox-${input.id}`);
        mkdirSync(folder, { recursive: true });
        edits.push([at('dir'), folder]);
        break;
      }
      case 'mqtt': {
        if (!broker) {
          broker = await startMosquitto(dir);
          tools.push(broker);
        }
        for (const key of [
          'caFile',
          'certFile',
          'keyFile',
          'username',
          'passwordFile',
          'passwordEnv',
        ])
          edits.push([at(key), undefined]);
        edits.push([at('url'), broker.url]);
        break;
      }
      case 'tcp': {
        if (input.mode === 'server') {
          // Readers connect to the gateway: it listens; nobody connects at idle.
          edits.push([at('host'), '127.0.0.1'], [at('port'), await freePort()]);
        } else {
          const reader = await silentTcpServer();
          tools.push(reader);
          edits.push([at('host'), '127.0.0.1'], [at('port'), reader.port]);
        }
        break;
      }
      case 'http': {
        const tokenFile = join(dir, `${input.id}-token`);
        writeFileSync(tokenFile, 'bench-ingest-token\n');
        edits.push([at('tokenFile'), tokenFile]);
        break;
      }
      default:
        throw new Error(
          `config/example.yaml has an input of type ${input.type} that the footprint benchmark cannot adapt yet`,
        );
    }
  }
  const file = join(dir, 'config.yaml');
  writeFileSync(file, adaptedExampleText(edits));
  return file;
}

/** The sandbox child's status-event broker (bench/sandbox-child.ts). */
export interface SandboxKafkaInfo {
  bootstrapServers: string;
  caPem: string;
  topic: string;
}

/** A TCP "reader" that accepts connections and sends nothing (the gateway's tcp client input connects to it). */
async function silentTcpServer(): Promise<Tool & { port: number }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    child: undefined,
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

interface Started {
  pid: number;
  lineMs: number;
  healthMs: number;
  stop(): Promise<void>;
}

/** Spawns the daemon; resolves once the start-up line appeared and /healthz answered (any status). */
async function startDaemon(
  node: string,
  configFile: string,
  cwd: string,
  nodeArgs: string[],
  env: Record<string, string>,
): Promise<Started> {
  const spawnedAt = nowMs();
  const child = track(
    spawn(
      node,
      [...nodeArgs, join(PACKAGE_ROOT, 'dist/src/main.js'), 'run', '--config', configFile],
      {
        cwd,
        env: { ...env, PATH: process.env.PATH ?? '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  let stderr = '';
  let lineMs = NaN;
  let healthUrl: string | undefined;
  // The start-up line is the JSON log line 'scan-gateway started' (on stdout; stderr hints are
  // written on a terminal only). Both streams are read so neither pipe fills up.
  const onOutput = (t: string) => {
    stderr += t;
    const m = /"http":"(http:\/\/[^"]+)"[^\n]*"msg":"scan-gateway started"/.exec(stderr);
    if (m && healthUrl === undefined) {
      lineMs = nowMs() - spawnedAt;
      healthUrl = `${m[1]}/healthz`;
    }
    if (stderr.length > 1_000_000) stderr = stderr.slice(-100_000);
  };
  child.stdout!.setEncoding('utf8').on('data', onOutput);
  child.stderr!.setEncoding('utf8').on('data', (t: string) => {
    onOutput(t);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  const port = /listen: 127\.0\.0\.1:(\d+)/.exec(readFileSync(configFile, 'utf8'))?.[1];
  const url = `http://127.0.0.1:${port}/healthz`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`the daemon exited with ${child.exitCode}: ${stderr.slice(-2000)}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the daemon did not answer ${url} within 30 s: ${stderr.slice(-2000)}`);
    }
    // Any answer counts: /healthz answers 503 while the gateway is up but reports itself down.
    const ok = await fetch(url).then(
      async (r) => {
        await r.arrayBuffer();
        return true;
      },
      () => false,
    );
    if (ok) break;
    await sleep(5);
  }
  const healthMs = nowMs() - spawnedAt;
  while (Number.isNaN(lineMs) && Date.now() < deadline) await sleep(5);
  return { pid: child.pid!, lineMs, healthMs, stop };
}

/** The packages prescribed for the daemon (fastify, better-sqlite3, chokidar, mqtt, serialport, undici, zod, p-queue, pino). */
export const PRESCRIBED_PACKAGES = [
  'fastify',
  'better-sqlite3',
  'chokidar',
  'mqtt',
  'serialport',
  'undici',
  'zod',
  'p-queue',
  'pino',
];

/**
 * Every package the daemon loads with config/example.yaml: the prescribed ones, the metrics,
 * the configuration's parser, the command line and the status events' Kafka client. (Not: the
 * sandbox's, the SFTP client, pino-pretty, unix-dgram: the example loads none of them.)
 */
export const EXAMPLE_PACKAGES = [
  ...PRESCRIBED_PACKAGES,
  'prom-client',
  'yaml',
  'commander',
  '@platformatic/kafka',
];

/**
 * The memory floor of `packages`: a bare process with the daemon's node options and
 * environment imports them, starts nothing, and reports its RSS after a full GC
 * (bench/library-floor.ts). Nothing the daemon builds can be below it. Least of `runs`.
 */
export function libraryFloorOf(
  node: string,
  packages: string[],
  nodeArgs: string[],
  env: Record<string, string>,
  runs = 2,
): { rssMiB: number; anonMiB: number; fileMiB: number } {
  const answers = Array.from({ length: runs }, () => {
    const out = execFileSync(
      node,
      [
        ...nodeArgs,
        '--expose-gc',
        join(PACKAGE_ROOT, 'dist', 'bench', 'library-floor.js'),
        JSON.stringify(packages),
      ],
      {
        cwd: PACKAGE_ROOT,
        env: { ...process.env, ...env },
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    const line = out.split('\n').find((l) => l.startsWith('{'));
    if (!line) throw new Error(`library-floor.js answered nothing: ${out}`);
    return JSON.parse(line) as { rssMiB: number; anonMiB: number; fileMiB: number };
  });
  return answers.reduce((a, b) => (b.rssMiB < a.rssMiB ? b : a));
}

/** A Node.js runtime the footprint is measured on. */
export interface Runtime {
  /** The node executable. */
  node: string;
  /** Its version, `v26.12.1`. */
  version: string;
  /** Whether it is the runtime the Debian package carries (runtimes/package.json, scanGateway.bundled). */
  bundled: boolean;
}

/**
 * The supported runtimes installed in runtimes/node_modules (`npm ci --prefix runtimes`), the
 * bundled one first; where none is installed, the node running the benchmark alone (not marked
 * bundled, so its figures are not read as the package's).
 */
export function footprintRuntimes(): Runtime[] {
  const pins = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'runtimes/package.json'), 'utf8')) as {
    scanGateway: { bundled: string; supported: string[] };
  };
  const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  const found: Runtime[] = [];
  for (const line of [
    pins.scanGateway.bundled,
    ...pins.scanGateway.supported.filter((l) => l !== pins.scanGateway.bundled),
  ]) {
    const dir = join(PACKAGE_ROOT, 'runtimes/node_modules', `node${line}-${arch}`);
    const node = join(dir, 'bin/node');
    if (!existsSync(node)) continue;
    const version = `v${(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version}`;
    found.push({ node, version, bundled: line === pins.scanGateway.bundled });
  }
  return found.length > 0
    ? found
    : [{ node: process.execPath, version: process.version, bundled: false }];
}

/** What one runtime's daemon measured: start-up, idle memory and CPU, and its own report at idle. */
interface RuntimeMeasure {
  runtime: Runtime;
  lines: number[];
  healths: number[];
  rss: number[];
  mem: ReturnType<typeof processMemory>;
  cpuPct: number;
  wakeups: number;
  metricsText: string;
  health: { status?: string; reasons?: string[]; inputs?: { id: string; state: string }[] };
  steadyParts: { cpuPct: number; wakeups: number }[];
}

/** Starts the daemon `opts.starts` times on `runtime`, then measures the last one at idle. */
async function measureRuntime(
  runtime: Runtime,
  opts: FootprintOptions,
  configFile: string,
  dir: string,
  nodeArgs: string[],
  env: Record<string, string>,
): Promise<RuntimeMeasure> {
  const lines: number[] = [];
  const healths: number[] = [];
  let daemon: Started | undefined;
  try {
    for (let i = 0; i < opts.starts; i++) {
      await daemon?.stop();
      daemon = await startDaemon(runtime.node, configFile, dir, nodeArgs, env);
      lines.push(daemon.lineMs);
      healths.push(daemon.healthMs);
    }
    const pid = daemon!.pid;
    const baseUrl = `http://127.0.0.1:${/listen: 127\.0\.0\.1:(\d+)/.exec(readFileSync(configFile, 'utf8'))?.[1]}`;
    await sleep(opts.settleMs);
    const cpu0 = processCpuSeconds(pid) ?? NaN;
    const switches0 = contextSwitches(pid);
    const t0 = nowMs();
    const rss: number[] = [];
    while (nowMs() - t0 < opts.idleMs) {
      const m = processMemory(pid);
      if (m) rss.push(m.rssMiB);
      await sleep(250);
    }
    const idleSec = (nowMs() - t0) / 1000;
    const cpuPct = (100 * ((processCpuSeconds(pid) ?? NaN) - cpu0)) / idleSec;
    const wakeups =
      ((contextSwitches(pid)?.voluntary ?? NaN) - (switches0?.voluntary ?? NaN)) / idleSec;
    const metricsText = await fetch(`${baseUrl}/metrics`).then(
      (r) => (r.ok ? r.text() : ''),
      () => '',
    );
    const mem = processMemory(pid);
    const health = (await fetch(`${baseUrl}/healthz`).then((r) =>
      r.json(),
    )) as RuntimeMeasure['health'];
    // Steady idle, after the figures above: three equal parts, nothing read from the daemon but /proc
    // (a scrape is work).
    const steadyParts: { cpuPct: number; wakeups: number }[] = [];
    for (let i = 0; opts.steadyMs && i < 3; i++) {
      const c0 = processCpuSecondsFine(pid) ?? NaN;
      const w0 = contextSwitches(pid)?.voluntary ?? NaN;
      const s0 = nowMs();
      await sleep(opts.steadyMs / 3);
      const sec = (nowMs() - s0) / 1000;
      steadyParts.push({
        cpuPct: (100 * ((processCpuSecondsFine(pid) ?? NaN) - c0)) / sec,
        wakeups: ((contextSwitches(pid)?.voluntary ?? NaN) - w0) / sec,
      });
    }
    return { runtime, lines, healths, rss, mem, cpuPct, wakeups, metricsText, health, steadyParts };
  } finally {
    await daemon?.stop();
  }
}

/** Runs benchmark 5. */
export async function benchFootprint(
  opts: FootprintOptions = FOOTPRINT_DEFAULTS,
): Promise<Omit<BenchResult, 'durationSec' | 'background'>> {
  const dir = mkdtempSync(join(tmpdir(), 'sg-bench-footprint-'));
  const tools: Tool[] = [];
  const sandbox = startJsonChild('sandbox-child.js', ['{}']);
  try {
    const { url, kafka } = await sandbox.next<{ url: string; kafka?: SandboxKafkaInfo }>(
      20_000,
      'the sandbox to listen',
    );
    const configFile = await adaptExample(
      dir,
      url,
      tools,
      opts.statusEvents === false ? 'off' : kafka,
    );
    const words = opts.nodeArgs ?? unitNodeArgs();
    const nodeArgs = words.filter((w) => !ENV_WORD.test(w));
    const env: Record<string, string> = { ...unitEnvironment() };
    for (const w of words.filter((w) => ENV_WORD.test(w)))
      env[w.slice(0, w.indexOf('='))] = w.slice(w.indexOf('=') + 1);
    // The bundled runtime first, with every figure and its targets; each other supported runtime
    // after it, with its start-up and memory, so a change of runtime shows in one run.
    const [first, ...others] = footprintRuntimes();
    const primary = await measureRuntime(first!, opts, configFile, dir, nodeArgs, env);
    const rest: RuntimeMeasure[] = [];
    for (const runtime of others)
      rest.push(
        await measureRuntime(runtime, { ...opts, steadyMs: 0 }, configFile, dir, nodeArgs, env),
      );
    const { lines, healths, rss, mem, cpuPct, wakeups, metricsText, health, steadyParts } = primary;
    const runtimeName = (r: Runtime) =>
      `Node.js ${r.version}${r.bundled ? ', the bundled runtime' : ''}`;
    const metric = (name: string) =>
      Number(new RegExp(`^${name} ([0-9.e+]+)`, 'm').exec(metricsText)?.[1] ?? NaN) / 2 ** 20;
    const spaces = [
      ...metricsText.matchAll(/^nodejs_heap_space_size_total_bytes\{space="(\w+)"\} ([0-9.e+]+)/gm),
    ]
      .map((m) => `${m[1]} ${(Number(m[2]) / 2 ** 20).toFixed(1)}`)
      .join(', ');
    const steadyFrom = Math.round((opts.settleMs + opts.idleMs) / 1000);
    const steadyNote = (values: number[], digits: number) =>
      `median of 3 windows of ${(opts.steadyMs ?? 0) / 3000} s from ${steadyFrom} to ${steadyFrom + (opts.steadyMs ?? 0) / 1000} s after ready: ${values.map((v) => v.toFixed(digits)).join(', ')}`;
    const prescribedFloor = libraryFloorOf(first!.node, PRESCRIBED_PACKAGES, nodeArgs, env);
    const exampleFloor = libraryFloorOf(first!.node, EXAMPLE_PACKAGES, nodeArgs, env);
    const floorNote = (f: { anonMiB: number; fileMiB: number }, packages: string[]) =>
      `a bare node process with the daemon's options importing ${packages.join(', ')}, nothing started, after a full GC (least of 2): ${f.anonMiB.toFixed(1)} MiB anonymous + ${f.fileMiB.toFixed(1)} MiB file-backed`;
    const figures: Figure[] = [
      judge({
        name: 'start to ready (/healthz answers)',
        value: median(healths),
        unit: 'ms',
        note: `median of ${opts.starts} starts: ${healths.map(Math.round).join(', ')} ms`,
      }),
      judge({ name: 'start to start-up line', value: median(lines), unit: 'ms' }),
      judge({
        name: 'RSS at idle',
        value: Math.max(...rss),
        unit: 'MiB',
        targets: [{ kind: 'max', of: 'value', value: 80 }],
        note: `largest of ${rss.length} samples over ${opts.idleMs / 1000} s (mean ${(rss.reduce((a, b) => a + b, 0) / rss.length).toFixed(1)} MiB), ${opts.settleMs / 1000} s after ready`,
      }),
      judge({
        name: 'RSS at the end of the idle window',
        value: mem?.rssMiB ?? NaN,
        unit: 'MiB',
        note: `${mem?.anonMiB.toFixed(1)} MiB anonymous (heaps, stacks) + ${mem?.fileMiB.toFixed(1)} MiB file-backed (code of node and native modules, shared)`,
      }),
      judge({ name: 'peak RSS since start (VmHWM)', value: mem?.peakMiB ?? NaN, unit: 'MiB' }),
      judge({
        name: 'RSS floor: the prescribed packages alone',
        value: prescribedFloor.rssMiB,
        unit: 'MiB',
        ceiling: { value: 80, what: 'the idle target (80 MiB)' },
        note: floorNote(prescribedFloor, PRESCRIBED_PACKAGES),
      }),
      judge({
        name: 'RSS floor: the packages the example loads',
        value: exampleFloor.rssMiB,
        unit: 'MiB',
        ceiling: { value: 80, what: 'the idle target (80 MiB)' },
        note: `${floorNote(exampleFloor, EXAMPLE_PACKAGES)}; a ratio over 1: no daemon with these packages idles under the target`,
      }),
      judge({
        name: 'CPU at idle',
        value: cpuPct,
        unit: '% of one core',
        note: `over ${opts.idleMs / 1000} s, ${opts.settleMs / 1000} s after ready, from /proc/PID/stat; holds V8's memory reducer when it runs in this window (once after the start, about 200 ms)`,
      }),
      judge({
        name: 'wake-ups at idle',
        value: wakeups,
        unit: '/s',
        note: 'voluntary context switches of the main thread',
      }),
    ];
    for (const r of rest) {
      const name = runtimeName(r.runtime);
      figures.push(
        judge({
          name: `start to ready on ${name}`,
          value: median(r.healths),
          unit: 'ms',
          note: `median of ${opts.starts} starts: ${r.healths.map(Math.round).join(', ')} ms`,
        }),
        judge({
          name: `RSS at idle on ${name}`,
          value: Math.max(...r.rss),
          unit: 'MiB',
          note: `largest of ${r.rss.length} samples over ${opts.idleMs / 1000} s, ${opts.settleMs / 1000} s after ready; at the end ${r.mem?.rssMiB.toFixed(1)} MiB (${r.mem?.anonMiB.toFixed(1)} anonymous + ${r.mem?.fileMiB.toFixed(1)} file-backed)`,
        }),
        judge({
          name: `peak RSS since start (VmHWM) on ${name}`,
          value: r.mem?.peakMiB ?? NaN,
          unit: 'MiB',
        }),
      );
    }
    if (steadyParts.length === 3) {
      figures.push(
        judge({
          name: 'CPU at steady idle',
          value: median(steadyParts.map((p) => p.cpuPct)),
          unit: '% of one core',
          note: `all threads, from /proc/PID/task/*/schedstat; ${steadyNote(
            steadyParts.map((p) => p.cpuPct),
            3,
          )}`,
        }),
        judge({
          name: 'wake-ups at steady idle',
          value: median(steadyParts.map((p) => p.wakeups)),
          unit: '/s',
          note: `main thread; ${steadyNote(
            steadyParts.map((p) => p.wakeups),
            1,
          )}`,
        }),
      );
    }
    return {
      id: 'footprint',
      title:
        'Footprint: the compiled daemon with config/example.yaml on local ptys, folders and the sandbox',
      figures,
      notes: [
        `runtime of the figures without "on Node.js": ${runtimeName(first!)} (${first!.node})${first!.bundled ? '' : '; the supported runtimes are not installed here (npm ci --prefix runtimes), so this is the node running the benchmark'}; also measured: ${rest.map((r) => runtimeName(r.runtime)).join(', ') || 'none'}`,
        `V8 heap at idle (from /metrics): used ${metric('nodejs_heap_size_used_bytes').toFixed(1)} MiB of ${metric('nodejs_heap_size_total_bytes').toFixed(1)} MiB, external ${metric('nodejs_external_memory_bytes').toFixed(1)} MiB; heap spaces (MiB): ${spaces}`,
        `node options of the daemon: ${nodeArgs.length ? nodeArgs.join(' ') : '(none)'}${opts.nodeArgs ? ' (--node-args)' : " (systemd/scan-gateway.service's ExecStart)"}; environment: ${
          Object.entries(env)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ') || '(none)'
        } (the unit's Environment=${opts.nodeArgs?.some((w) => ENV_WORD.test(w)) ? ', with --node-args' : ''})`,
        `health at idle: ${health.status ?? '?'}${health.reasons?.length ? ` (${health.reasons.join('; ')})` : ''}; inputs ${(health.inputs ?? []).map((i) => `${i.id} ${i.state}`).join(', ')}`,
      ],
    };
  } finally {
    await sandbox.stop();
    for (const t of tools) await t.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
