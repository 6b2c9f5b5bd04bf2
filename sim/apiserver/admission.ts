/**
 * Calls the registered admission webhooks the way kube-apiserver does: reads the
 * Mutating/ValidatingWebhookConfiguration objects, matches rules, namespace and object selectors,
 * POSTs an `admission.k8s.io/v1` AdmissionReview over HTTPS trusting only the caBundle, applies the
 * returned JSON patch, and turns a refusal or a failed call into kube-apiserver's own messages.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { type ApiError, admissionDenied, internal } from './api-status.js';
import type { MatchConditionEvaluator } from './match-conditions.js';
import { applyJsonPatch } from './patch.js';
import type { ResourceType } from './resource-registry.js';
import { type KubeObject, type LabelSelector, matchLabelSelector } from './selectors.js';

export type AdmissionOperation = 'CREATE' | 'UPDATE' | 'DELETE';

export type AdmissionAttempt = {
  operation: AdmissionOperation;
  type: ResourceType;
  subresource?: string;
  namespace?: string;
  name: string;
  object: KubeObject | null;
  oldObject: KubeObject | null;
  dryRun: boolean;
  userInfo: { username: string; groups: string[] };
  /** Receives each webhook's `response.warnings` (kube-apiserver returns them as `Warning` headers). */
  warn?: (text: string) => void;
};

type Rule = {
  operations?: string[];
  apiGroups?: string[];
  apiVersions?: string[];
  resources?: string[];
  scope?: string;
};

export type WebhookSpec = {
  name: string;
  clientConfig: {
    url?: string;
    service?: { namespace: string; name: string; path?: string; port?: number };
    caBundle?: string;
  };
  rules?: Rule[];
  failurePolicy?: 'Ignore' | 'Fail';
  namespaceSelector?: LabelSelector;
  objectSelector?: LabelSelector;
  timeoutSeconds?: number;
  matchConditions?: { name: string; expression: string }[];
  admissionReviewVersions?: string[];
};

export type AdmissionSources = {
  mutating: () => { metadata: { name: string }; webhooks?: WebhookSpec[] }[];
  validating: () => { metadata: { name: string }; webhooks?: WebhookSpec[] }[];
  namespaceLabels: (namespace: string) => Record<string, string>;
  /** Resolves a `clientConfig.service` reference to a base URL; the sim maps services to loopback ports. */
  resolveService?: (svc: { namespace: string; name: string; port?: number }) => string | undefined;
  onCall?: (record: { webhook: string; allowed: boolean; error?: string }) => void;
  /** CEL for `matchConditions`; absent, as a server without the feature, they are not evaluated. */
  matchConditions?: MatchConditionEvaluator;
  /**
   * The bearer token presented to every webhook, as kube-apiserver presents the one its
   * AdmissionConfiguration's `kubeConfigFile` gives for the webhook's host.
   */
  webhookToken?: string;
};

function matchesList(list: string[] | undefined, value: string): boolean {
  return !list || list.includes('*') || list.includes(value);
}

// A rule's resources as kube-apiserver reads them: `pods` is the resource only, `pods/*` its
// subresources only, `*/*` everything.
export function matchesResource(list: string[] | undefined, resource: string, sub: string | undefined): boolean {
  return (list ?? []).some((r) => {
    if (r === '*/*') return true;
    if (r === '*') return !sub;
    const [res, s] = r.split('/');
    if (s === undefined) return !sub && res === resource;
    return sub !== undefined && (res === resource || res === '*') && (s === sub || s === '*');
  });
}

function matchesRule(rule: Rule, a: AdmissionAttempt): boolean {
  const scope = rule.scope ?? '*';
  if (scope === 'Namespaced' && !a.type.namespaced) return false;
  if (scope === 'Cluster' && a.type.namespaced) return false;
  return (
    matchesList(rule.operations, a.operation) &&
    matchesList(rule.apiGroups, a.type.group) &&
    matchesList(rule.apiVersions, a.type.version) &&
    matchesResource(rule.resources, a.type.resource, a.subresource)
  );
}

type ReviewRequest = ReturnType<typeof reviewRequest>;

/** Whether kube-apiserver's rules and selectors send this request to `hook`. */
function selects(hook: WebhookSpec, a: AdmissionAttempt, src: AdmissionSources): boolean {
  if (!(hook.rules ?? []).some((r) => matchesRule(r, a))) return false;
  if (a.type.namespaced && a.namespace && hook.namespaceSelector) {
    if (!matchLabelSelector(hook.namespaceSelector, src.namespaceLabels(a.namespace))) return false;
  }
  const labelsOf = (o: KubeObject | null) => o?.metadata.labels ?? {};
  if (hook.objectSelector) {
    const hit =
      matchLabelSelector(hook.objectSelector, labelsOf(a.object)) ||
      (a.oldObject !== null && matchLabelSelector(hook.objectSelector, labelsOf(a.oldObject)));
    if (!hit) return false;
  }
  return true;
}

/**
 * The review to send `hook`, or undefined when kube-apiserver would not call it: rules and
 * selectors, then matchConditions over the very request the webhook would get. A condition that
 * failed to evaluate is decided by failurePolicy: Ignore skips the webhook, Fail refuses the request.
 */
function reviewFor(hook: WebhookSpec, a: AdmissionAttempt, src: AdmissionSources): ReviewRequest | undefined {
  if (!selects(hook, a, src)) return undefined;
  const review = reviewRequest(a);
  const conditions = hook.matchConditions ?? [];
  if (conditions.length === 0 || !src.matchConditions) return review;
  const verdict = src.matchConditions(conditions, {
    object: a.object,
    oldObject: a.oldObject,
    request: review.request,
  });
  if (verdict.kind === 'call') return review;
  if (verdict.kind === 'skip') return undefined;
  src.onCall?.({ webhook: hook.name, allowed: false, error: verdict.message });
  if (hook.failurePolicy === 'Ignore') return undefined;
  throw internal(`Internal error occurred: failed calling webhook "${hook.name}": ${verdict.message}`);
}

function reviewRequest(a: AdmissionAttempt) {
  const gvk = { group: a.type.group, version: a.type.version, kind: a.type.kind };
  const gvr = { group: a.type.group, version: a.type.version, resource: a.type.resource };
  const optionsKind = { CREATE: 'CreateOptions', UPDATE: 'UpdateOptions', DELETE: 'DeleteOptions' }[a.operation];
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: gvk,
      resource: gvr,
      ...(a.subresource ? { subResource: a.subresource, requestSubResource: a.subresource } : {}),
      requestKind: gvk,
      requestResource: gvr,
      name: a.name,
      ...(a.namespace ? { namespace: a.namespace } : {}),
      operation: a.operation,
      userInfo: a.userInfo,
      object: a.object,
      oldObject: a.oldObject,
      dryRun: a.dryRun,
      options: { kind: optionsKind, apiVersion: 'meta.k8s.io/v1' },
    },
  };
}

/**
 * Where to POST, and the TLS server name to verify: a service reference is dialled at the address
 * the sim resolves it to, but verified as `<name>.<namespace>.svc`, as kube-apiserver does.
 */
function webhookTarget(hook: WebhookSpec, src: AdmissionSources): { url: string; servername?: string } {
  const cc = hook.clientConfig;
  let base = cc.url;
  let servername: string | undefined;
  if (!base && cc.service) {
    const root = src.resolveService?.(cc.service);
    if (!root) throw new Error(`service "${cc.service.namespace}/${cc.service.name}" has no endpoints`);
    base = root.replace(/\/$/, '') + (cc.service.path ?? '');
    servername = `${cc.service.name}.${cc.service.namespace}.svc`;
  }
  if (!base) throw new Error('webhook has neither url nor service');
  const url = new URL(base);
  url.searchParams.set('timeout', `${hook.timeoutSeconds ?? 10}s`);
  return { url: url.toString(), ...(servername ? { servername } : {}) };
}

async function post(
  url: string,
  body: unknown,
  caBundle: string | undefined,
  timeoutMs: number,
  servername?: string,
  token?: string,
): Promise<unknown> {
  const u = new URL(url);
  const payload = Buffer.from(JSON.stringify(body));
  const lib = u.protocol === 'https:' ? https : http;
  const ca = caBundle ? Buffer.from(caBundle, 'base64').toString('utf8') : undefined;
  return new Promise((resolve, reject) => {
    const req = lib.request(
      u,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          'content-length': payload.length,
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        ...(ca ? { ca } : {}),
        ...(servername ? { servername } : {}),
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200)
            return reject(new Error(`the server responded with status ${res.statusCode}: ${text.slice(0, 200)}`));
          try {
            resolve(JSON.parse(text));
          } catch {
            reject(new Error('response body is not JSON'));
          }
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error('context deadline exceeded (Client.Timeout exceeded while awaiting headers)')),
    );
    req.on('error', reject);
    req.end(payload);
  });
}

type Review = {
  apiVersion?: string;
  kind?: string;
  response?: {
    uid?: string;
    allowed?: boolean;
    patch?: string;
    patchType?: string;
    status?: { code?: number; message?: string; reason?: string };
    warnings?: unknown;
  };
};

/** kube-apiserver's `ToStatusErr`: at least 400, the webhook's message after "denied the request". */
function denial(hook: string, status: NonNullable<Review['response']>['status']): ApiError {
  const deniedBy = `admission webhook "${hook}" denied the request`;
  const code = (status?.code ?? 0) < 400 ? 400 : status!.code!;
  const message = status?.message
    ? `${deniedBy}: ${status.message}`
    : status?.reason
      ? `${deniedBy}: ${status.reason}`
      : `${deniedBy} without explanation`;
  return admissionDenied(code, message, status?.reason);
}

async function callOne(
  hook: WebhookSpec,
  a: AdmissionAttempt,
  review: ReviewRequest,
  mutating: boolean,
  src: AdmissionSources,
): Promise<KubeObject | null> {
  let url = '(unresolved)';
  let reply: Review;
  try {
    const target = webhookTarget(hook, src);
    url = target.url;
    const timeoutMs = (hook.timeoutSeconds ?? 10) * 1000;
    const { caBundle } = hook.clientConfig;
    reply = (await post(url, review, caBundle, timeoutMs, target.servername, src.webhookToken)) as Review;
    if (reply.apiVersion !== 'admission.k8s.io/v1' || reply.kind !== 'AdmissionReview' || !reply.response) {
      throw new Error('expected response.apiVersion admission.k8s.io/v1 and kind AdmissionReview with a response');
    }
    if (reply.response.uid !== review.request.uid) {
      throw new Error(`expected response.uid="${review.request.uid}", got "${reply.response.uid}"`);
    }
    if (!mutating && (reply.response.patch || reply.response.patchType)) {
      throw new Error('validating webhook may not return a patch');
    }
  } catch (e) {
    src.onCall?.({ webhook: hook.name, allowed: false, error: (e as Error).message });
    if (hook.failurePolicy === 'Ignore') return a.object;
    throw internal(
      `Internal error occurred: failed calling webhook "${hook.name}": failed to call webhook: Post "${url}": ${(e as Error).message}`,
    );
  }
  const res = reply.response!;
  src.onCall?.({ webhook: hook.name, allowed: res.allowed === true });
  // As kube-apiserver: warnings reach the client whether the webhook allowed the request or not.
  if (Array.isArray(res.warnings)) for (const w of res.warnings) if (typeof w === 'string') a.warn?.(w);
  if (res.allowed !== true) throw denial(hook.name, res.status);
  if (!res.patch) return a.object;
  if (res.patchType !== 'JSONPatch') {
    throw internal(`Internal error occurred: webhook "${hook.name}" returned patchType ${String(res.patchType)}`);
  }
  const ops = JSON.parse(Buffer.from(res.patch, 'base64').toString('utf8'));
  return applyJsonPatch(a.object, ops) as KubeObject;
}

/** Runs the mutating webhooks in order, then the validating ones; returns the admitted object. */
export async function admit(a: AdmissionAttempt, src: AdmissionSources): Promise<KubeObject | null> {
  const byName = <T extends { metadata: { name: string } }>(list: T[]) =>
    [...list].sort((x, y) => x.metadata.name.localeCompare(y.metadata.name));
  let current = a;
  for (const cfg of byName(src.mutating())) {
    for (const hook of cfg.webhooks ?? []) {
      const review = reviewFor(hook, current, src);
      if (review) current = { ...current, object: await callOne(hook, current, review, true, src) };
    }
  }
  const validations: Promise<unknown>[] = [];
  for (const cfg of byName(src.validating())) {
    for (const hook of cfg.webhooks ?? []) {
      const review = reviewFor(hook, current, src);
      if (review) validations.push(callOne(hook, current, review, false, src));
    }
  }
  await Promise.all(validations);
  return current.object;
}
