import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['**/node_modules/**', 'native/build/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores in CI: limit parallel files so process-spawning suites do not starve each other.
    maxWorkers: 2,
    pool: 'forks',
  },
});
