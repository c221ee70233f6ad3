import { defineConfig } from 'vitest/config';

// The workspace packages (packages/*) are run from their TypeScript sources, as src/ is: their
// package.json exports name them under the `source` condition, so a test needs no build of them
// and a test and the code under it load one copy of each module (one GatewayError class).
const conditions = ['source', 'module', 'node', 'development|production'];

// The suite in four layers (CONTRIBUTING.md): each project's setup checks, and as root installs,
// the system tools its tests drive, so a layer never skips for a missing tool. Every layer first
// gets the run's scratch directory as TMPDIR (test/setup/scratch.ts), removed when the run ends.
//   unit         pure code and in-process parts: no root, no system tool        npm run test:unit
//   integration  real brokers, ptys, sshd, etcd, TLS, tmpfs mounts (root)        npm run test:integration
//   e2e          the built daemon as a process, the browser, crash loops         npm run test:e2e
//   package      the .deb: lintian, clean Debian roots, arm64 (root, slow)       npm run test:package
export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['node'] } },
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start real brokers, ptys and child processes; two cores cannot run many at once.
    maxWorkers: 2,
    // The built-in input kinds, registered as the gateway's entry points register them.
    setupFiles: ['test/setup/input-kinds.ts'],
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'src/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
          globalSetup: ['test/setup/scratch.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/setup/scratch.ts', 'test/setup/integration.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/setup/scratch.ts', 'test/setup/e2e.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'package',
          include: ['test/package/**/*.test.ts'],
          globalSetup: ['test/setup/scratch.ts', 'test/setup/package.ts'],
          // mmdebstrap, nspawn boots and emulated arm64 take minutes each, many more on a busy
          // machine: the ceiling only catches a hang.
          testTimeout: 3_600_000,
          hookTimeout: 3_600_000,
        },
      },
    ],
  },
});
