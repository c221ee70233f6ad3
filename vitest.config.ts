import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start real brokers, ptys and child processes; two cores cannot run many at once.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
