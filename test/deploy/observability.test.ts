/**
 * Metrics, alerts and the Grafana dashboard agree with the code: every `vcuda_*` metric the rules
 * and panels query is one the code exports, and deploy/README.md documents every exported one.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { envKeys } from '../../control-plane/config.js';
import { configSchema as nodeAgentConfigSchema } from '../../node-agent/config.js';
import { sourceFiles } from './api-calls.js';
import { deployDir, readYamlDocs } from './manifests.js';

/** Every metric name the production code registers (`name: 'vcuda_…'` in a prom-client constructor). */
function exportedMetrics(): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of sourceFiles(['control-plane', 'webhooks', 'node-agent', 'db'])) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/name:\s*['"`](vcuda_[a-z0-9_]+)['"`]/g)) out.set(m[1] as string, file);
  }
  return out;
}

/** `vcuda_*` series an expression reads, histogram suffixes folded onto their metric. */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/\bvcuda_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, ''));
}

type Rule = {
  alert?: string;
  record?: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
};
const rulesDoc = readYamlDocs(join(deployDir, 'overlays/monitoring/prometheus-rules.yaml'))[0] as {
  spec: { groups: { name: string; rules: Rule[] }[] };
};
const rules = rulesDoc.spec.groups.flatMap((g) => g.rules);
const grafana = JSON.parse(readFileSync(join(deployDir, 'grafana/vcuda.json'), 'utf8')) as {
  panels: { title: string; targets?: { expr: string }[] }[];
  templating: { list: { query?: unknown; definition?: string }[] };
};
const metrics = exportedMetrics();

describe('observability', () => {
  it('finds the metrics the code exports', () => {
    expect(metrics.size).toBeGreaterThan(5);
    for (const name of metrics.keys()) expect(name).toMatch(/^vcuda_[a-z0-9_]+$/);
  });

  it('alerts and recording rules read only exported metrics', () => {
    const unknown = rules.flatMap((r) =>
      metricsIn(r.expr)
        .filter((m) => !metrics.has(m))
        .map((m) => `${r.alert ?? r.record}: ${m}`),
    );
    expect(unknown).toEqual([]);
  });

  it('every alert has a severity, a summary and a description', () => {
    for (const r of rules.filter((x) => x.alert)) {
      expect(['critical', 'warning', 'info'], r.alert).toContain(r.labels?.severity);
      expect(r.annotations?.summary, r.alert).toBeTruthy();
      expect(r.annotations?.description, r.alert).toBeTruthy();
    }
  });

  it('Grafana panels query only exported metrics or recording rules defined here', () => {
    const recorded = new Set(rules.filter((r) => r.record).map((r) => r.record as string));
    const exprs = [
      ...grafana.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: p.title, expr: t.expr }))),
      ...grafana.templating.list
        .filter((v) => v.definition)
        .map((v) => ({ where: 'variable', expr: v.definition as string })),
    ];
    expect(exprs.length).toBeGreaterThan(10);
    const unknown = exprs.flatMap((e) =>
      metricsIn(e.expr)
        .filter((m) => !metrics.has(m))
        .map((m) => `${e.where}: ${m}`),
    );
    const unknownRecorded = exprs.flatMap((e) =>
      [...e.expr.matchAll(/\bvcuda:[a-z0-9_:]+/g)].map((m) => m[0]).filter((r) => !recorded.has(r)),
    );
    expect([...unknown, ...unknownRecorded]).toEqual([]);
  });

  it('Grafana dashboard is importable: unique panel ids, panels within the 24-column grid, a data-source variable', () => {
    const panels = grafana.panels as unknown as { id: number; gridPos: { x: number; w: number } }[];
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels) expect(p.gridPos.x + p.gridPos.w, `panel ${p.id}`).toBeLessThanOrEqual(24);
    expect(grafana.templating.list.some((v) => (v as { type?: string }).type === 'datasource')).toBe(true);
    const exprs = grafana.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    for (const e of exprs) expect(e.split('(').length, e).toBe(e.split(')').length);
  });

  it('deploy/README.md documents every exported metric', () => {
    const readme = readFileSync(join(deployDir, 'README.md'), 'utf8');
    const missing = [...metrics.keys()].filter((m) => !readme.includes(`\`${m}\``));
    expect(missing, 'add a row to the metrics table of deploy/README.md').toEqual([]);
  });

  it('deploy/README.md documents every control-plane environment variable and node-agent key', () => {
    const readme = readFileSync(join(deployDir, 'README.md'), 'utf8');
    const keysOf = (shape: Record<string, z.ZodType>, prefix = ''): string[] =>
      Object.entries(shape).flatMap(([k, v]) => {
        const inner = (v as unknown as { unwrap?: () => unknown; def?: { innerType?: unknown } }).def?.innerType ?? v;
        const nested = (inner as { shape?: Record<string, z.ZodType> }).shape;
        return nested ? keysOf(nested, `${prefix}${k}.`) : [`${prefix}${k}`];
      });
    const missing = [
      ...Object.keys(envKeys).filter((k) => !readme.includes(`\`${k}\``)),
      ...keysOf(nodeAgentConfigSchema.shape).filter((k) => !readme.includes(`\`${k}\``)),
    ];
    expect(missing, 'add them to "Configuration reference" in deploy/README.md').toEqual([]);
  });
});
