/**
 * Label and field selectors: the query-string forms (`app=x,tier!=y,env in (a,b),!legacy`,
 * `spec.nodeName=n1`) and the structured `LabelSelector` of webhook configurations.
 */
import { badRequest } from './api-status.js';

type Requirement = { key: string; op: 'in' | 'notin' | 'exists' | '!exists'; values: string[] };
export type Matcher = (obj: KubeObject) => boolean;
export type KubeObject = {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [k: string]: unknown;
  };
  [k: string]: unknown;
};

/** Splits on commas that are not inside parentheses. */
function splitTerms(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  if (cur.trim()) out.push(cur);
  return out.map((t) => t.trim()).filter(Boolean);
}

/** One requirement; keys and values use the characters Kubernetes allows in labels. */
function parseLabelTerm(term: string): Requirement {
  let m = /^([A-Za-z0-9._/-]+)\s+(in|notin)\s+\(([A-Za-z0-9._,\s-]*)\)$/.exec(term);
  if (m) {
    const values = m[3]!.split(',').map((v) => v.trim());
    return { key: m[1]!, op: m[2] as 'in' | 'notin', values };
  }
  m = /^([A-Za-z0-9._/-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)$/.exec(term);
  if (m) return { key: m[1]!, op: m[2] === '!=' ? 'notin' : 'in', values: [m[3]!] };
  m = /^!\s*([A-Za-z0-9._/-]+)$/.exec(term);
  if (m) return { key: m[1]!, op: '!exists', values: [] };
  m = /^([A-Za-z0-9._/-]+)$/.exec(term);
  if (m) return { key: m[1]!, op: 'exists', values: [] };
  throw badRequest(`unable to parse requirement: ${JSON.stringify(term)}`);
}

function matchRequirement(labels: Record<string, string>, r: Requirement): boolean {
  const has = Object.hasOwn(labels, r.key);
  switch (r.op) {
    case 'exists':
      return has;
    case '!exists':
      return !has;
    case 'in':
      return has && r.values.includes(labels[r.key]!);
    case 'notin':
      return !has || !r.values.includes(labels[r.key]!);
  }
}

export function parseLabelSelector(selector: string | null | undefined): Matcher {
  if (!selector) return () => true;
  const reqs = splitTerms(selector).map(parseLabelTerm);
  return (obj) => {
    const labels = obj.metadata.labels ?? {};
    return reqs.every((r) => matchRequirement(labels, r));
  };
}

export type LabelSelector = {
  matchLabels?: Record<string, string> | null;
  matchExpressions?: { key: string; operator: string; values?: string[] | null }[] | null;
};

/** The structured selector; `{}` or absent matches everything, as Kubernetes defines. */
export function matchLabelSelector(
  selector: LabelSelector | null | undefined,
  labels: Record<string, string>,
): boolean {
  if (!selector) return true;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const op = { In: 'in', NotIn: 'notin', Exists: 'exists', DoesNotExist: '!exists' }[e.operator] as
      | Requirement['op']
      | undefined;
    if (!op) return false;
    if (!matchRequirement(labels, { key: e.key, op, values: e.values ?? [] })) return false;
  }
  return true;
}

/** The value at a dotted path (split once, when the selector is parsed) as a selector compares it. */
function readField(obj: KubeObject, path: readonly string[]): string {
  let cur: unknown = obj;
  for (const part of path) {
    if (cur === null || typeof cur !== 'object') return '';
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur === undefined || cur === null ? '' : String(cur);
}

/** Field selectors on any dotted path; kube-apiserver allows only a few per type, vcuda uses fewer. */
export function parseFieldSelector(selector: string | null | undefined): Matcher {
  if (!selector) return () => true;
  const terms = splitTerms(selector).map((term) => {
    const m = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw badRequest(`invalid field selector: ${JSON.stringify(term)}`);
    return { path: m[1]!.split('.'), negate: m[2] === '!=', value: m[3]!.trim() };
  });
  return (obj) => terms.every((t) => (readField(obj, t.path) === t.value) !== t.negate);
}
