import {
  closeSync,
  fsyncSync,
  ftruncateSync,
  mkdtempSync,
  openSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { randomBytes, randomInt } from 'node:crypto';
import { join } from 'node:path';

/**
 * The fsync latency of a disk without SQLite or the gateway (docs/performance.md, "Stalls"): the
 * write pattern of the buffer's checkpoint (6 random 4 KiB pages of a 400 MiB file overwritten and
 * one appended, then fsync) alternating with that of a commit (2 pages into a small log file, then
 * fsync), about 190 of each a second, for `seconds`. Prints p50, p99, max and the count of fsyncs
 * of 50 and 100 ms or more for each file.
 *
 *   node dist/bench/fsync-probe.js [folder=/tmp] [seconds=60]
 */
const [folder = '/tmp', secondsArg = '60'] = process.argv.slice(2);
const dir = mkdtempSync(join(folder, 'sg-fsync-probe-'));
try {
  const db = openSync(join(dir, 'probe.db'), 'w+');
  const log = openSync(join(dir, 'probe.wal'), 'w+');
  const page = randomBytes(4096);
  let size = 400 * 2 ** 20;
  ftruncateSync(db, size);
  const mib = randomBytes(2 ** 20);
  for (let off = 0; off < size; off += 2 ** 20) writeSync(db, mib, 0, mib.length, off);
  fsyncSync(db);
  const lat = { database: [] as number[], log: [] as number[] };
  const timed = (fd: number, into: number[]) => {
    const t = performance.now();
    fsyncSync(fd);
    into.push(performance.now() - t);
  };
  const end = Date.now() + Number(secondsArg) * 1000;
  for (let i = 0; Date.now() < end; i++) {
    writeSync(log, Buffer.concat([page, page]), 0, 8192, (i % 256) * 8192);
    timed(log, lat.log);
    for (let k = 0; k < 6; k++) writeSync(db, page, 0, 4096, randomInt(size / 4096) * 4096);
    writeSync(db, page, 0, 4096, size);
    size += 4096;
    timed(db, lat.database);
    // About the gateway's rate at 500 reads/s (its 427 to 765 fsyncs a second, two per step here).
    await new Promise((r) => setTimeout(r, 3));
  }
  closeSync(db);
  closeSync(log);
  for (const [name, ms] of Object.entries(lat)) {
    ms.sort((a, b) => a - b);
    const n = ms.length;
    process.stdout.write(
      `${name}: ${n} fsyncs, p50 ${ms[n >> 1]!.toFixed(2)} ms, p99 ${ms[Math.floor(n * 0.99)]!.toFixed(2)} ms, max ${ms[n - 1]!.toFixed(1)} ms, ≥ 50 ms ${ms.filter((x) => x >= 50).length}, ≥ 100 ms ${ms.filter((x) => x >= 100).length}\n`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
