import { spawnSync } from 'node:child_process';

/**
 * Flags for Debian's chromium headless here: no sandbox (root), no GPU, and none of the background
 * connections that this machine's closed network refuses.
 */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** Debian's chromium, for playwright-core's `executablePath`; a browser test fails (never skips) without it. */
export function chromiumPath(): string {
  const r = spawnSync('which', ['chromium'], { encoding: 'utf8' });
  const path = r.stdout?.trim();
  if (r.status !== 0 || !path) {
    throw new Error(
      'chromium is required for the health page browser tests but was not found on PATH; install it: apt-get install chromium (.ci/run does)',
    );
  }
  return path;
}
