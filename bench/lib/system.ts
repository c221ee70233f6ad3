import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statfsSync } from 'node:fs';
import { cpus, release, tmpdir, totalmem, type as osType } from 'node:os';
import type { Background, MachineInfo } from './report.js';

/**
 * Linux facts the benchmarks measure with: /proc/<pid>/stat (CPU ticks), /proc/<pid>/status
 * (resident and peak resident memory), /proc/stat (machine-wide busy time), free ports.
 */

/** The machine: CPU model, cores, memory, node, kernel. */
export function machineInfo(): MachineInfo {
  const list = cpus();
  let tmpFreeGiB: number | undefined;
  try {
    const fs = statfsSync(tmpdir());
    tmpFreeGiB = Math.round((fs.bavail * fs.bsize) / 2 ** 30);
  } catch {
    tmpFreeGiB = undefined;
  }
  return {
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    cores: list.length,
    memTotalMiB: Math.round(totalmem() / 2 ** 20),
    node: process.version,
    os: `${osType()} ${release()}`,
    ...(tmpFreeGiB !== undefined ? { tmpFreeGiB } : {}),
  };
}

let clockTicks: number | undefined;

/** Clock ticks per second of /proc times (`getconf CLK_TCK`, 100 on every common Linux). */
export function clkTck(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU time (user + system) a process has used so far, in seconds; undefined when it is gone. */
export function processCpuSeconds(pid: number): number | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: split after its closing parenthesis.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // Fields 14 (utime) and 15 (stime) of proc(5), counted from field 3 here.
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / clkTck();
}

/**
 * Resident memory now and its high-water mark, in MiB (VmRSS, VmHWM of /proc/<pid>/status), and
 * the resident part split into anonymous memory (heaps, stacks) and file-backed pages (the node
 * executable's and native modules' code, shared with other processes that map the same files).
 */
export function processMemory(
  pid: number,
): { rssMiB: number; peakMiB: number; anonMiB: number; fileMiB: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const kib = (key: string) =>
    Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
  return {
    rssMiB: kib('VmRSS') / 1024,
    peakMiB: kib('VmHWM') / 1024,
    anonMiB: kib('RssAnon') / 1024,
    fileMiB: kib('RssFile') / 1024,
  };
}

/**
 * CPU time (user + system) of all threads of a process so far, in seconds, at nanosecond
 * resolution: the sum of the first field of each thread's `/proc/PID/task/TID/schedstat`
 * (`/proc/PID/stat` counts in clock ticks, 10 ms: too coarse for an idle daemon's 2 to 3 ms a
 * second). Threads that ended are not counted. Undefined when the process is gone.
 */
export function processCpuSecondsFine(pid: number): number | undefined {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  let ns = 0;
  for (const tid of tids) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return ns / 1e9;
}

/** Context switches of a process's main thread so far (voluntary: it slept, i.e. it woke up that often). */
export function contextSwitches(
  pid: number,
): { voluntary: number; involuntary: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const n = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  return { voluntary: n('voluntary_ctxt_switches'), involuntary: n('nonvoluntary_ctxt_switches') };
}

/** Busy and total ticks of all cores together, from the first line of /proc/stat. */
function systemTicks(): { busy: number; total: number } {
  const first = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
  const n = first.trim().split(/\s+/).slice(1).map(Number);
  const total = n.reduce((a, b) => a + b, 0);
  const idle = (n[3] ?? 0) + (n[4] ?? 0); // idle + iowait
  return { busy: total - idle, total };
}

/**
 * How busy the machine is with other people's work: the busy share of all cores over `ms`, while
 * the caller does nothing, and the 1-minute load average.
 */
export async function sampleBackground(ms = 1000): Promise<Background> {
  const a = systemTicks();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const b = systemTicks();
  const busyPct = b.total > a.total ? (100 * (b.busy - a.busy)) / (b.total - a.total) : 0;
  const loadavg1 = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
  return { busyPct: Math.round(busyPct), loadavg1 };
}

/** CPU ticks of this process and of its children that have exited (utime, stime, cutime, cstime). */
function ownTicks(): number {
  const text = readFileSync('/proc/self/stat', 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
}

/**
 * Starts measuring how busy other people's work kept the machine: the returned function answers
 * the share of all cores (in %) that was busy between the two calls, minus the CPU used by this
 * process and its children (each benchmark stops its children before it returns, so their time
 * is counted once they exited).
 */
export function othersBusyMeter(): () => number {
  const a = systemTicks();
  const own = ownTicks();
  return () => {
    const b = systemTicks();
    if (b.total <= a.total) return 0;
    return Math.max(0, (100 * (b.busy - a.busy - (ownTicks() - own))) / (b.total - a.total));
  };
}

/** A TCP port free on 127.0.0.1 now: the tests' helper (test/helpers/ports.ts), shared. */
export { freePort } from '../../test/helpers/ports.js';

/** The p-th percentile (0–100) of `sorted` (ascending), nearest rank. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

/** The median of some numbers. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Milliseconds since an arbitrary start, sub-millisecond. */
export const nowMs = (): number => performance.now();

/**
 * Wall-clock time in ms since the epoch with sub-millisecond precision, comparable between
 * processes on the same machine (for latency across a publisher and a gateway process).
 */
export const epochMs = (): number => performance.timeOrigin + performance.now();

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/**
 * CPU time (user + system) one thread of a process has used so far, in seconds (/proc/PID/task/TID/stat;
 * the main thread's TID is the PID); undefined when it is gone.
 */
export function threadCpuSeconds(pid: number, tid: number): number | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clkTck();
}

/**
 * Scheduler times of one thread so far (/proc/PID/task/TID/schedstat, in ns): on a core, and
 * runnable but waiting for a core. The rest of the wall time the thread slept (I/O such as fsync,
 * or nothing to do). Undefined when the thread is gone or the kernel has no schedstats.
 */
export function threadSchedNs(
  pid: number,
  tid: number,
): { runNs: number; waitNs: number } | undefined {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8')
      .trim()
      .split(' ')
      .map(Number);
    return run !== undefined && wait !== undefined && Number.isFinite(run) && Number.isFinite(wait)
      ? { runNs: run, waitNs: wait }
      : undefined;
  } catch {
    return undefined;
  }
}
