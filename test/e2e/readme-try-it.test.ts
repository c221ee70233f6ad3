import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { waitFor } from '../helpers/wait.js';

// This test follows the README's try-it steps on a fresh clone, word for
// word. The commands are taken from README.md itself (its first sh block's `npm start` line and
// the block after "Try it"), so a README edit is what gets tested. Everything they use must be in
// the repository: the clone has only what is committed (no dist/, no node_modules, no var/).
// `npm ci` installs from the registry or npm's cache, as for a new user.

/** The shell blocks of the README, in order. */
function shellBlocks(readme: string): string[][] {
  return [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) =>
    m[1]!.split('\n').filter((l) => l.trim() !== ''),
  );
}

/** Pids of the processes whose working folder is `dir` (from /proc). */
function processesIn(dir: string): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/cwd`) === dir;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * A new user's environment: PATH and HOME, and the Node.js headers npm builds native modules
 * against when the runtime on PATH is not the system's (npm_config_nodedir, as .ci/run sets it for
 * each runtime); without it npm's node-gyp takes the system Node's headers, and the gateway dies on
 * an ABI mismatch at start.
 */
function cleanEnv(home: string): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? home,
  };
  if (process.env.npm_config_nodedir) env.npm_config_nodedir = process.env.npm_config_nodedir;
  return env;
}

function sh(command: string, cwd: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync('sh', ['-c', command], {
    cwd,
    encoding: 'utf8',
    timeout: 30_000,
    env: cleanEnv(cwd),
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("the README's try-it steps on a fresh clone", () => {
  it('npm ci && npm start, then the four commands of the second terminal, word for word', async () => {
    const readme = readFileSync(join(PACKAGE_ROOT, 'README.md'), 'utf8');
    const blocks = shellBlocks(readme);
    const start = blocks[0]!.find((l) => l.startsWith('npm ci && npm start'));
    expect(start, 'the first sh block starts the demo').toBeDefined();
    const tryIt = blocks[1]!;
    expect(readme.indexOf('Try it from a second terminal')).toBeLessThan(readme.indexOf(tryIt[0]!));
    expect(tryIt.map((l) => l.split(/\s+/)[0])).toEqual(['cp', 'curl', 'curl', 'node']);

    // A fresh clone of what is committed (HEAD).
    const clone = join(mkdtempSync(join(tmpdir(), 'sg-readme-')), 'scan-gateway');
    execFileSync('git', ['clone', '--quiet', PACKAGE_ROOT, clone]);
    expect(existsSync(join(clone, 'node_modules'))).toBe(false);

    // First terminal: `npm ci && npm start` as written, in its own process group.
    const first = spawn('sh', ['-c', start!], {
      cwd: clone,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: cleanEnv(clone),
    });
    let out = '';
    first.stdout.on('data', (d: Buffer) => (out += d.toString()));
    first.stderr.on('data', (d: Buffer) => (out += d.toString()));
    let firstExit: number | null | undefined;
    const exited = new Promise<number | null>((resolve) =>
      first.once('exit', (code) => {
        firstExit = code;
        resolve(code);
      }),
    );
    try {
      // npm ci compiles unix-dgram (the only module without a Node-API binary in its package): seconds to a minute.
      // A start that ends (npm ci failed, the gateway died) ends the wait at once, with what it printed.
      await waitFor(
        () =>
          firstExit !== undefined ||
          (out.includes('"msg":"scan-gateway started"') && existsSync(join(clone, 'var/inbox'))),
        {
          timeoutMs: 480_000,
          intervalMs: 250,
          what: 'npm ci && npm start up',
        },
      ).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}\n${out.slice(-3000)}`);
      });
      if (firstExit !== undefined)
        throw new Error(
          `npm ci && npm start ended with ${firstExit} before the gateway was up:\n${out.slice(-3000)}`,
        );

      // Second terminal, word for word.
      const [cp, scans, healthz, trace] = tryIt as [string, string, string, string];
      const copied = sh(cp, clone);
      expect(copied.code, copied.stderr).toBe(0);
      // The scans arrive after a batch delay; the curl is repeated as a person would.
      const delivered = await waitFor(
        () => {
          const r = sh(scans, clone);
          const body = JSON.parse(r.stdout) as {
            scans: { requestId: string; scan: { reference?: unknown } }[];
          };
          return body.scans.length > 0 ? body.scans : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 500, what: 'scans at the sandbox' },
      );
      // The sample's rows arrive as scans (one row is an invalid GS1 code: a rejection, not sent).
      expect(delivered.length).toBeGreaterThanOrEqual(3);
      for (const s of delivered) expect(typeof s.scan.reference).toBe('string');
      const health = JSON.parse(sh(healthz, clone).stdout) as {
        status: string;
        deliveredScans: number;
        rejectedReads: number;
      };
      expect(['ok', 'degraded']).toContain(health.status);
      expect(health.rejectedReads).toBeGreaterThan(0);

      // The trace of a sample row's pack by the line printed under its barcode, on the running
      // gateway's buffer: the demo sent it under its canonical GS1 reference, batch as attribute.
      const traced = sh(trace, clone);
      expect(traced.code, traced.stderr).toBe(0);
      expect(traced.stdout).toContain(
        'https://id.gs1.org/01/09521234543213/21/C2611030001234: 1 scan in the buffer',
      );
      expect(traced.stdout).toContain('batch=B2611-03');

      // "The file moves to var/inbox/processed/<date>/ once its rows are committed to the buffer."
      const processed = join(clone, 'var/inbox/processed');
      await waitFor(
        () =>
          existsSync(processed) &&
          readdirSync(processed, { recursive: true }).some((f) =>
            String(f).endsWith('goods-in-export.csv'),
          ),
        { what: 'the file in processed/<date>/' },
      );
    } finally {
      // Ctrl-C in the first terminal: SIGINT to the whole group.
      // The group may be gone already (npm start died): that must not hide why, which the wait above reported.
      if (first.pid !== undefined) {
        try {
          process.kill(-first.pid, 'SIGINT');
        } catch (err) {
          // ESRCH: nothing left to stop. Anything else is reported without hiding the test's own error.
          if ((err as NodeJS.ErrnoException).code !== 'ESRCH')
            console.error('stopping npm start:', err);
        }
      }
    }
    await exited;
    // Ctrl-C ends the gateway too: no process is left working in the clone.
    await waitFor(() => processesIn(clone).length === 0, {
      timeoutMs: 35_000,
      what: 'every process of the clone ended',
    });
  }, 600_000);
});
