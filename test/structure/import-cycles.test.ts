import { describe, expect, it } from 'vitest';
import {
  buildImportGraph,
  describeCycle,
  findImportCycles,
  type ImportGraph,
  siblingFolderGraph,
  staticImports,
} from './import-graph.js';
import { listProductionFiles, REPOSITORY_ROOT } from './source-files.js';

const graphOf = (edges: Record<string, string[]>): ImportGraph => new Map(Object.entries(edges));

describe('the cycle finder', () => {
  it('finds a two-file cycle, a longer one and a self-import, and nothing in a tree', () => {
    const graph = graphOf({
      'a.ts': ['b.ts'],
      'b.ts': ['a.ts', 'leaf.ts'],
      'c.ts': ['d.ts'],
      'd.ts': ['e.ts'],
      'e.ts': ['c.ts', 'leaf.ts'],
      'self.ts': ['self.ts'],
      'leaf.ts': [],
      'root.ts': ['a.ts', 'c.ts', 'leaf.ts'],
    });
    expect(findImportCycles(graph)).toEqual([['a.ts', 'b.ts'], ['c.ts', 'd.ts', 'e.ts'], ['self.ts']]);
    expect(findImportCycles(graphOf({ 'r.ts': ['x.ts', 'y.ts'], 'x.ts': ['y.ts'], 'y.ts': [] }))).toEqual([]);
  });

  it('sees a cycle through a chain too deep for a recursive walk', () => {
    const depth = 20_000;
    const edges: Record<string, string[]> = {};
    for (let i = 0; i < depth; i++) edges[`f${i}.ts`] = [`f${(i + 1) % depth}.ts`];
    const [cycle] = findImportCycles(graphOf(edges));
    expect(cycle).toHaveLength(depth);
  });

  it('reads imports, type-only imports and re-exports, and leaves out packages and dynamic imports', () => {
    const text = [
      "import { a } from './a.js';",
      "import type { B } from '../b.js';",
      "export { c } from './c.js';",
      "export * from './d.js';",
      "import { z } from 'zod';",
      "const lazy = () => import('./lazy.js');",
      'export const x = 1;',
    ].join('\n');
    expect(staticImports(text)).toEqual(['./a.js', '../b.js', './c.js', './d.js']);
  });

  it('joins files into folders, and a cycle between sibling folders shows; a parent and its child do not count', () => {
    const graph = graphOf({
      'agent/allocation/allocator.ts': ['agent/plugin/ids.ts'],
      'agent/plugin/plugins.ts': ['agent/allocation/allocator.ts', 'agent/health.ts'],
      'agent/plugin/ids.ts': [],
      'agent/health.ts': ['agent/plugin/ids.ts'],
    });
    expect(findImportCycles(graph)).toEqual([]);
    expect(findImportCycles(siblingFolderGraph(graph))).toEqual([['agent/allocation', 'agent/plugin']]);
  });
});

describe('production code', () => {
  const graph = buildImportGraph(REPOSITORY_ROOT);

  it('is what the check walks: every production folder, and no test file', () => {
    const files = listProductionFiles(REPOSITORY_ROOT);
    for (const folder of ['cli/', 'contract/', 'control-plane/', 'db/', 'node-agent/', 'sim/', 'webhooks/']) {
      expect(files.some((f) => f.startsWith(folder))).toBe(true);
    }
    expect(files.filter((f) => f.endsWith('.test.ts') || f.startsWith('test/'))).toEqual([]);
    expect(graph.get('node-agent/agent.ts')).toContain('node-agent/allocation/allocator.ts');
  });

  it('has no import cycle between files', () => {
    const cycles = findImportCycles(graph).map((cycle) => describeCycle(graph, cycle));
    expect(cycles, `import cycles:\n${cycles.join('\n\n')}`).toEqual([]);
  });

  it("keeps the kubelet's protocol types a leaf, and allocation below every plugin kind", () => {
    expect(graph.get('node-agent/kubelet/protocol.ts')).toEqual([]);
    const allocationReachesUp = [...graph]
      .filter(([file]) => file.startsWith('node-agent/allocation/'))
      .flatMap(([file, targets]) =>
        targets.filter((t) => t.startsWith('node-agent/device-plugin/')).map((t) => `${file} → ${t}`),
      );
    expect(allocationReachesUp).toEqual([]);
  });

  it('has no import cycle between sibling folders', () => {
    const folders = siblingFolderGraph(graph);
    const cycles = findImportCycles(folders).map((cycle) => describeCycle(folders, cycle));
    expect(cycles, `folder cycles:\n${cycles.join('\n\n')}`).toEqual([]);
  });
});
