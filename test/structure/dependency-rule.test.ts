/**
 * The README's dependency rule, checked over the production import graph: `contract` and
 * `kube-connections` are imported by everything and import no other component; `db` and
 * `webhooks` are imported by `control-plane`; `webhooks` reaches into `db` for the ledger deadline
 * only; the node agent talks to the others only over the network. `cli` (each component's
 * subcommands) and `sim` (demo and test code) may import any component.
 */
import { describe, expect, it } from 'vitest';
import { buildImportGraph } from './import-graph.js';
import { REPOSITORY_ROOT } from './source-files.js';

const leaves = ['contract', 'kube-connections'];

/** Per component, the components its production files may import (besides its own files). */
const allowed: Record<string, readonly string[]> = {
  contract: [],
  'kube-connections': ['contract'],
  db: leaves,
  webhooks: [...leaves, 'db/deadline.ts'],
  'control-plane': [...leaves, 'db', 'webhooks'],
  'node-agent': leaves,
};

const componentOf = (file: string): string => file.split('/')[0] as string;

/** Whether `rule` (a component, or one file of one) admits `target`. */
const admits = (rule: string, target: string): boolean =>
  rule.endsWith('.ts') ? target === rule : componentOf(target) === rule;

describe('the dependency rule', () => {
  const graph = buildImportGraph(REPOSITORY_ROOT);

  it('holds for every import of every production file', () => {
    const broken: string[] = [];
    for (const [from, targets] of graph) {
      const rules = allowed[componentOf(from)];
      if (!rules) continue;
      for (const to of targets) {
        if (componentOf(to) !== componentOf(from) && !rules.some((r) => admits(r, to))) broken.push(`${from} -> ${to}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('sees the components it rules on (a renamed folder must be renamed here too)', () => {
    const components = new Set([...graph.keys()].map(componentOf));
    for (const name of Object.keys(allowed)) expect(components, name).toContain(name);
  });
});
