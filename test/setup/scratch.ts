import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Set while a run's scratch directory exists, so the layers of one run share one. */
const MARK = 'SCAN_GATEWAY_TEST_SCRATCH';

/**
 * Global setup of every layer (vitest.config.ts): one scratch directory per run becomes the
 * `TMPDIR` of the test workers and of every process they start (`os.tmpdir()` reads it), and is
 * removed when the run ends.
 *
 * Why: the tests make hundreds of temporary directories (buffers, brokers, etcd members of
 * 370 MB each, Debian roots), and one that a test forgets, or that a killed daemon leaves behind,
 * would otherwise stay in /tmp for good. Run after run, on one machine, that filled the disk until
 * the package build failed with ENOSPC. A run now leaves nothing behind, whatever its tests do.
 *
 * Vitest starts its workers after the global setups, so they inherit the changed environment.
 * A second layer of the same run (`vitest run --project unit --project integration`) finds the
 * mark and keeps the directory the first one made.
 */
export default function setup(): (() => void) | undefined {
  if (process.env[MARK] !== undefined) return undefined;
  const previous = process.env.TMPDIR;
  const dir = mkdtempSync(join(tmpdir(), 'sgt-'));
  // As /tmp is: tests run daemons as service users that traverse it and make their own files.
  chmodSync(dir, 0o1777);
  process.env.TMPDIR = dir;
  process.env[MARK] = dir;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    delete process.env[MARK];
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      // A mount a test left behind (a tmpfs, a FUSE file system) refuses removal: say where.
      console.warn(`test scratch ${dir} not removed: ${(err as Error).message}`);
    }
  };
}
