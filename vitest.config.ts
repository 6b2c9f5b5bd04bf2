import { configDefaults, defineConfig } from 'vitest/config';
import { OWN_PROCESS_TESTS } from './test/own-process-tests.js';

const exclude = [...configDefaults.exclude, '**/node_modules/**', 'native/build/**'];
/**
 * What both projects share; each project has its own copy, the root's options reach the projects
 * only as the run's (workers, global setup). Not the global setup: a project would run it again,
 * nesting TMPDIR.
 */
const common = {
  // Generous: several suites spawn the CLI or a whole simulated cluster, and CI has two busy cores.
  testTimeout: 60_000,
  hookTimeout: 60_000,
  pool: 'forks',
} as const;

export default defineConfig({
  test: {
    // Two cores in CI: limit parallel files so process-spawning suites do not starve each other.
    maxWorkers: 2,
    // Every temporary directory of the run under one, removed at its end.
    globalSetup: ['test/support/temp-root.ts'],
    projects: [
      // Files that load a native library in-process or change process-wide state
      // (test/structure/own-process.ts): a fresh process each.
      { test: { ...common, name: 'own-process', include: [...OWN_PROCESS_TESTS], exclude } },
      // Every other file shares its worker's process with the files before it: the modules they
      // share are imported once per worker, not once per file.
      {
        test: {
          ...common,
          name: 'shared-process',
          include: ['**/*.test.ts'],
          exclude: [...exclude, ...OWN_PROCESS_TESTS],
          isolate: false,
        },
      },
    ],
  },
});
