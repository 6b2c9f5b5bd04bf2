import { dirname, join } from 'node:path';
import { listProductionFiles, parseTypeScript, readSource } from './source-files.js';

/**
 * Relative module specifiers of every static import and re-export in a file, type-only ones
 * included: two modules whose types need each other cannot be understood apart either.
 * A dynamic `import()` is left out on purpose: it is how a module defers a load.
 */
export function staticImports(sourceText: string, fileName = 'file.ts'): string[] {
  const specifiers: string[] = [];
  for (const statement of parseTypeScript(sourceText, fileName).body) {
    const isModuleLink =
      statement.type === 'ImportDeclaration' ||
      statement.type === 'ExportAllDeclaration' ||
      (statement.type === 'ExportNamedDeclaration' && statement.source !== null);
    const source = isModuleLink ? (statement as { source: { value: string } }).source.value : undefined;
    if (source?.startsWith('.')) specifiers.push(source);
  }
  return specifiers;
}

/** Maps `./x.js` (NodeNext spelling) to the repository-relative `.ts` file it names, if it is one of `files`. */
function resolveSpecifier(fromFile: string, specifier: string, files: ReadonlySet<string>): string | undefined {
  const target = join(dirname(fromFile), specifier).replaceAll('\\', '/');
  const candidates = [target.replace(/\.js$/, '.ts'), `${target}.ts`, `${target}/index.ts`];
  return candidates.find((candidate) => files.has(candidate));
}

/** file → the files it imports. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

/**
 * The import graph of `files` (default: the production files under `root`), keyed by
 * repository-relative path; imports of files outside the list are left out.
 */
export function buildImportGraph(root: string, files: readonly string[] = listProductionFiles(root)): ImportGraph {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = staticImports(readSource(root, file), file)
      .map((specifier) => resolveSpecifier(file, specifier, known))
      .filter((target): target is string => target !== undefined);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

type Frame = { node: string; next: number };

/**
 * Every import cycle, as the strongly connected components of the graph that hold more than one
 * file (or a file that imports itself); several cycles tangled together come out as one.
 * Tarjan's algorithm, iterative so that a deep chain of imports cannot overflow the stack.
 */
export function findImportCycles(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const lowLink = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const cycles: string[][] = [];

  const visit = (node: string, work: Frame[]): void => {
    index.set(node, index.size);
    lowLink.set(node, index.get(node) as number);
    stack.push(node);
    onStack.add(node);
    work.push({ node, next: 0 });
  };
  const lower = (node: string, candidate: number): void => {
    lowLink.set(node, Math.min(lowLink.get(node) as number, candidate));
  };
  const closeComponent = (root: string): void => {
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      component.push(member);
    } while (member !== root);
    if (component.length > 1 || (graph.get(root) ?? []).includes(root)) cycles.push(component.sort());
  };

  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: Frame[] = [];
    visit(start, work);
    while (work.length > 0) {
      const frame = work[work.length - 1] as Frame;
      const target = (graph.get(frame.node) ?? [])[frame.next++];
      if (target !== undefined) {
        if (!index.has(target)) visit(target, work);
        else if (onStack.has(target)) lower(frame.node, index.get(target) as number);
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent !== undefined) lower(parent.node, lowLink.get(frame.node) as number);
      if (lowLink.get(frame.node) === index.get(frame.node)) closeComponent(frame.node);
    }
  }
  return cycles;
}

/** One line per file of a cycle: the file and the members of the cycle it imports. */
export function describeCycle(graph: ImportGraph, cycle: readonly string[]): string {
  const members = new Set(cycle);
  return cycle
    .map((file) => `${file} → ${(graph.get(file) ?? []).filter((target) => members.has(target)).join(', ')}`)
    .join('\n');
}

function isWithin(folder: string, other: string): boolean {
  return other === folder || other.startsWith(`${folder}/`) || folder === '.';
}

/**
 * The graph of folders: folder → the folders its files import, leaving out imports between a
 * folder and one inside it (a composition root above its parts, a part reading its parent's
 * shared types). What remains are edges between sibling areas, such as `allocation/` and
 * `device-plugin/`, where a cycle means neither can be moved, replaced or read without the other.
 */
export function siblingFolderGraph(graph: ImportGraph): ImportGraph {
  const folders = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    const from = dirname(file);
    const edges = folders.get(from) ?? new Set<string>();
    for (const target of targets) {
      const to = dirname(target);
      if (!isWithin(from, to) && !isWithin(to, from)) edges.add(to);
    }
    folders.set(from, edges);
  }
  return new Map([...folders].map(([folder, edges]) => [folder, [...edges].sort()]));
}
