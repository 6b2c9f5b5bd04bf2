import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['**/node_modules/**', 'native/build/**'],
    // Generous: several suites spawn the CLI or a whole simulated cluster, and CI has two busy cores.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores in CI: limit parallel files so process-spawning suites do not starve each other.
    maxWorkers: 2,
    pool: 'forks',
    // Every temporary directory of the run under one, removed at its end.
    globalSetup: ['test/support/temp-root.ts'],
  },
});
