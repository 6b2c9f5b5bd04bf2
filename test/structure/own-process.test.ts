import { describe, expect, it } from 'vitest';
import { OWN_PROCESS_TESTS } from '../own-process-tests.js';
import { buildImportGraph, type ImportGraph } from './import-graph.js';
import { loadsNativeLibrary, ownProcessReasons } from './own-process.js';
import { listTypeScriptFiles, REPOSITORY_ROOT, readSource } from './source-files.js';

const graphOf = (edges: Record<string, string[]>): ImportGraph => new Map(Object.entries(edges));
// The examples are spelled in pieces, so this file's own text does not match the rule it tests.
const PROC = 'process';
const VI = 'vi';
const KOFFI = 'koffi';

describe('which test files need a process of their own', () => {
  it('a file that reaches a native binding through its imports, and not one beside it', () => {
    const graph = graphOf({
      'a.test.ts': ['harness.ts'],
      'harness.ts': ['nvml.ts'],
      'nvml.ts': [],
      'b.test.ts': ['pure.ts'],
      'pure.ts': [],
    });
    const natives = new Set(['nvml.ts']);
    expect(ownProcessReasons('a.test.ts', '', graph, natives)).toEqual([
      'loads a native library in-process (through nvml.ts)',
    ]);
    expect(ownProcessReasons('b.test.ts', '', graph, natives)).toEqual([]);
    expect(loadsNativeLibrary(`import k from '${KOFFI}';`)).toBe(true);
    expect(loadsNativeLibrary(`const k = await import('${KOFFI}');`)).toBe(true);
    expect(loadsNativeLibrary(`import { z } from 'zod'; // ${KOFFI}`)).toBe(false);
  });

  it('a file that changes process-wide state; reading it is not changing it', () => {
    const reasons = (text: string) => ownProcessReasons('t.test.ts', text, graphOf({}), new Set());
    expect(reasons(`${PROC}.env['FAKEGPU_STATE'] = path;`)).toEqual(['assigns to process.env']);
    expect(reasons(`${PROC}.env.TMPDIR = dir;`)).toEqual(['assigns to process.env']);
    expect(reasons(`Object.assign(${PROC}.env, env);`)).toEqual(['assigns to process.env']);
    expect(reasons(`delete ${PROC}.env['X'];`)).toEqual(['deletes from process.env']);
    expect(reasons(`${PROC}.chdir(dir);`)).toEqual(['changes the working directory']);
    expect(reasons(`${VI}.useFakeTimers();`)).toEqual(["uses vitest's process-wide mocks or fake timers"]);
    expect(reasons(`${VI}.mock('./x.js');`)).toEqual(["uses vitest's process-wide mocks or fake timers"]);
    expect(reasons(`const dir = ${PROC}.env['TMPDIR'];`)).toEqual([]);
    expect(reasons(`if (${PROC}.env['CI'] === 'true') skip();`)).toEqual([]);
    expect(reasons(`const env = { ...${PROC}.env, X: '1' };`)).toEqual([]);
    expect(reasons(`const mask = ${PROC}.umask();`)).toEqual([]);
  });

  it('the list vitest.config.ts runs apart is exactly the files the rule finds', () => {
    const files = listTypeScriptFiles(REPOSITORY_ROOT);
    const graph = buildImportGraph(REPOSITORY_ROOT, files);
    const natives = new Set(files.filter((f) => loadsNativeLibrary(readSource(REPOSITORY_ROOT, f))));
    const needed = new Map<string, string[]>();
    for (const file of files.filter((f) => f.endsWith('.test.ts'))) {
      const reasons = ownProcessReasons(file, readSource(REPOSITORY_ROOT, file), graph, natives);
      if (reasons.length > 0) needed.set(file, reasons);
    }
    const listed = new Set(OWN_PROCESS_TESTS);
    const missing = [...needed]
      .filter(([file]) => !listed.has(file))
      .map(([file, why]) => `${file}: ${why.join('; ')}`);
    expect(missing, 'add these to test/own-process-tests.ts').toEqual([]);
    expect(
      OWN_PROCESS_TESTS.filter((file) => !needed.has(file)),
      'listed in test/own-process-tests.ts, but the rule finds no reason (or the file is gone)',
    ).toEqual([]);
    expect(natives.size, 'the node agent binds NVML through koffi').toBeGreaterThan(0);
  });
});
