/**
 * Which test files must run in a process of their own. The suite's other files share their
 * worker's process one after another (vitest's `isolate: false`: one import of the modules they
 * share, not one per file), which is only sound for a file that leaves the process as it found
 * it. Two kinds of file do not:
 *
 * - one that loads a native library in-process (koffi: the fake NVML and CUDA libraries read
 *   their FAKEGPU_* settings once per process, at their first call, and stay loaded);
 * - one that changes what every later file would see: process.env, the working directory, the
 *   umask, vitest's module mocks, stubbed globals or fake timers.
 */
import type { ImportGraph } from './import-graph.js';

const PROCESS_WIDE_CHANGES: readonly (readonly [RegExp, string])[] = [
  [/process\.env(\.\w+|\[[^\]]+\])\s*=(?!=)/, 'assigns to process.env'],
  [/Object\.assign\(\s*process\.env\b/, 'assigns to process.env'],
  [/\bdelete\s+process\.env\b/, 'deletes from process.env'],
  [/\bprocess\.chdir\(/, 'changes the working directory'],
  [/\bprocess\.umask\(\s*[^)\s]/, 'changes the umask'],
  [/\bvi\.(mock|doMock|stubEnv|stubGlobal|useFakeTimers)\(/, "uses vitest's process-wide mocks or fake timers"],
];

/** Whether `text` (a module's source) loads koffi, the FFI that binds native libraries in-process. */
export function loadsNativeLibrary(text: string): boolean {
  return /\bfrom\s+['"]koffi['"]/.test(text) || /\bimport\(\s*['"]koffi['"]\s*\)/.test(text);
}

/** The first module of `natives` that `file` reaches through `graph`, `file` itself included. */
function reachedNative(file: string, graph: ImportGraph, natives: ReadonlySet<string>): string | undefined {
  const seen = new Set([file]);
  const queue = [file];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    if (natives.has(next)) return next;
    for (const target of graph.get(next) ?? []) {
      if (!seen.has(target)) {
        seen.add(target);
        queue.push(target);
      }
    }
  }
  return undefined;
}

/**
 * Why the test file `file` (source `text`) needs a process of its own; empty when it may share
 * one. `natives` are the modules that load a native library themselves.
 */
export function ownProcessReasons(
  file: string,
  text: string,
  graph: ImportGraph,
  natives: ReadonlySet<string>,
): string[] {
  const reasons = PROCESS_WIDE_CHANGES.filter(([pattern]) => pattern.test(text)).map(([, reason]) => reason);
  const native = reachedNative(file, graph, natives);
  if (native) reasons.push(`loads a native library in-process (through ${native})`);
  return [...new Set(reasons)];
}
