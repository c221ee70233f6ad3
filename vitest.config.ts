import { defineConfig } from 'vitest/config';

// The workspace packages (packages/*) are run from their TypeScript sources, as src/ is: their
// package.json exports name them under the `source` condition, so a test needs no build of them
// and a test and the code under it load one copy of each module (one GatewayError class).
const conditions = ['source', 'module', 'node', 'development|production'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['node'] } },
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start real brokers, ptys and child processes; two cores cannot run many at once.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
