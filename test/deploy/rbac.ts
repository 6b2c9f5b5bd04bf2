/**
 * RBAC as the API server evaluates it, for the parts vcuda's manifests use: which rules apply to
 * a service account (through RoleBindings and ClusterRoleBindings), and whether they allow a call.
 */
import type { K8sObject } from './manifests.js';

export type PolicyRule = { apiGroups?: string[]; resources?: string[]; verbs: string[]; resourceNames?: string[] };

export type GrantedRule = PolicyRule & {
  /** Namespace the rule is limited to (a Role, or a ClusterRole bound by a RoleBinding); undefined: cluster-wide. */
  namespace?: string;
  from: string;
};

type Binding = K8sObject & {
  roleRef: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
};

/** Every rule granted to one service account by the given objects. Roles not among them (built-in ones) are skipped. */
export function rulesFor(objects: readonly K8sObject[], sa: { namespace: string; name: string }): GrantedRule[] {
  const roles = new Map<string, K8sObject & { rules?: PolicyRule[] }>();
  for (const o of objects) {
    if (o.kind === 'ClusterRole') roles.set(`ClusterRole/${o.metadata.name}`, o);
    if (o.kind === 'Role') roles.set(`Role/${o.metadata.namespace}/${o.metadata.name}`, o);
  }
  const out: GrantedRule[] = [];
  for (const o of objects as Binding[]) {
    if (o.kind !== 'RoleBinding' && o.kind !== 'ClusterRoleBinding') continue;
    const bound = (o.subjects ?? []).some(
      (s) =>
        s.kind === 'ServiceAccount' && s.name === sa.name && (s.namespace ?? o.metadata.namespace) === sa.namespace,
    );
    if (!bound) continue;
    const key =
      o.roleRef.kind === 'ClusterRole'
        ? `ClusterRole/${o.roleRef.name}`
        : `Role/${o.metadata.namespace}/${o.roleRef.name}`;
    const role = roles.get(key);
    if (!role) continue;
    const namespace = o.kind === 'RoleBinding' ? o.metadata.namespace : undefined;
    for (const r of role.rules ?? []) out.push({ ...r, namespace, from: `${o.kind} ${o.metadata.name} → ${key}` });
  }
  return out;
}

const has = (list: string[] | undefined, value: string) => (list ?? []).includes(value) || (list ?? []).includes('*');

/** Verbs that can be limited to named objects; a rule with resourceNames never allows the others. */
const NAMEABLE_VERBS = new Set(['get', 'update', 'patch', 'delete']);

export function ruleAllows(
  rule: PolicyRule,
  call: { verb: string; group: string; resource: string },
  opts: { ignoreNames?: boolean } = {},
): boolean {
  if (!has(rule.apiGroups, call.group) || !has(rule.resources, call.resource) || !has(rule.verbs, call.verb))
    return false;
  if (rule.resourceNames && rule.resourceNames.length > 0 && !opts.ignoreNames) return NAMEABLE_VERBS.has(call.verb);
  return true;
}

/** Rules granting this call; namespaced grants count (the call's namespace is not known statically). */
export function grantsFor(
  rules: readonly GrantedRule[],
  call: { verb: string; group: string; resource: string },
): GrantedRule[] {
  return rules.filter((r) => ruleAllows(r, call));
}

/** Every (verb, group, resource) a set of rules grants, wildcards kept as '*'. */
export function grantedTriples(
  rules: readonly GrantedRule[],
): { verb: string; group: string; resource: string; rule: GrantedRule }[] {
  const out: { verb: string; group: string; resource: string; rule: GrantedRule }[] = [];
  for (const r of rules) {
    for (const group of r.apiGroups ?? []) {
      for (const resource of r.resources ?? [])
        for (const verb of r.verbs) out.push({ verb, group, resource, rule: r });
    }
  }
  return out;
}
