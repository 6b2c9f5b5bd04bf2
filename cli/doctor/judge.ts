/**
 * `vcuda doctor`'s judgments: from facts gathered about a live installation (probe.ts) to
 * findings, each saying what is wrong and the command or setting that fixes it. Pure, so every
 * verdict is tested without a cluster.
 */
import { X509Certificate } from 'node:crypto';
import { splitPemBundle } from '../../webhooks/pem-bundle.js';

import { type DraFacts, judgeDra, sliceNodesOf } from './dra-judge.js';
import { type Finding, failed, type Probed } from './finding.js';

export type { Verdict } from './finding.js';
export { type DraFacts, type Finding, failed, type Probed };

export type WebhookFacts = { configName: string; kind: 'mutating' | 'validating'; hook: string; caBundlePem: string };
export type NodeFacts = {
  name: string;
  heartbeat?: string;
  hasInventory: boolean;
  gpuLabelled: boolean;
  /** The node's allocatable has vcuda-core: its agent serves the extender's device plugin. */
  deviceResources?: boolean;
};
export type JwksFacts = {
  /** `jwks.json` of the vcuda-jwks ConfigMap; undefined when the ConfigMap or key is missing. */
  jwks: string | undefined;
  /** Key ids in the headers of assignments on running vcuda pods: what the control plane signs with. */
  assignmentKids: Probed<string[]>;
};
/** A call without a client certificate: the HTTP status, or the TLS handshake's refusal. */
export type AnonymousAnswer = { status: number } | { handshakeRefused: string };
export type ExtenderFacts = {
  url: string;
  anonymous: Probed<AnonymousAnswer>;
  /** Absent when no client certificate was given or found. */
  withClientCert?: Probed<{ status: number; body: string }>;
  /** The client certificate used, to check its expiry. */
  clientCertPem?: string;
};
export type PendingPodFacts = {
  namespace: string;
  name: string;
  schedulerName: string;
  createdAt?: string;
  /** The newest Warning event's reason and message (FailedScheduling, VcudaBindConflict, ...). */
  lastWarning?: string;
};
/** A GPU pod the kubelet failed at admission: placed around vcuda (spec.nodeName by hand, admission skipped). */
export type UnplacedPodFacts = { namespace: string; name: string; node: string; message: string };
export type MigrationFacts = { known: { tag: string; millis: number }[]; appliedMillis: number[] };
export type DoctorFacts = {
  now: Date;
  namespace: string;
  /** Silence after which the extender places nothing on a node (control plane's heartbeatStaleSeconds). */
  heartbeatStaleMs: number;
  apiServer: Probed<{ version: string }>;
  webhooks: Probed<WebhookFacts[]>;
  /** The webhook's serving certificate (PEM) from its Secret; undefined when there is no such Secret. */
  servingCertPem: Probed<string | undefined>;
  nodes: Probed<NodeFacts[]>;
  jwks: Probed<JwksFacts>;
  /** vcuda pods (label vcuda.io/gpu) still Pending, a few of them with their newest warning. */
  pendingPods: Probed<PendingPodFacts[]>;
  /** GPU pods the kubelet failed at admission (UnexpectedAdmissionError); absent when not probed. */
  unplacedPods?: Probed<UnplacedPodFacts[]>;
  /** The control plane's /readyz, when a URL was given. */
  readiness?: Probed<{ status: number; body: string }>;
  extender?: ExtenderFacts;
  /** Applied vs shipped migrations, when a database URL was given. */
  migrations?: Probed<MigrationFacts>;
  /** resource.k8s.io as the API server serves it, for vcuda's DRA driver; absent when not probed. */
  dra?: Probed<DraFacts>;
};

const DAY_MS = 86_400_000;
/** The control plane's default heartbeatStaleSeconds (node agents write every 30 s). */
export const DEFAULT_HEARTBEAT_STALE_MS = 60_000;

/** The certificates of a PEM bundle that parse; garbage counts as no certificate. */
function certificates(pem: string): X509Certificate[] {
  return splitPemBundle(pem).flatMap((b) => {
    try {
      return [new X509Certificate(b)];
    } catch {
      return [];
    }
  });
}

function expiry(cert: X509Certificate, now: Date, what: string, fix: string): Finding | undefined {
  const notAfter = new Date(cert.validTo);
  const left = notAfter.getTime() - now.getTime();
  if (left <= 0)
    return { check: 'certificates', verdict: 'fail', summary: `${what} expired ${notAfter.toISOString()}`, fix };
  if (left < 7 * DAY_MS)
    return { check: 'certificates', verdict: 'warn', summary: `${what} expires ${notAfter.toISOString()}`, fix };
  return undefined;
}

/** The CA of `bundle` whose key signed `cert`, if any. */
function issuerIn(cert: X509Certificate, bundle: readonly X509Certificate[]): X509Certificate | undefined {
  return bundle.find((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey));
}

const restartControlPlane = (ns: string, why: string) =>
  `kubectl -n ${ns} rollout restart deploy/vcuda-control-plane (${why})`;

export function judgeApiServer(f: DoctorFacts): Finding {
  if (failed(f.apiServer))
    return {
      check: 'API server',
      verdict: 'fail',
      summary: `not reachable: ${f.apiServer.error}`,
      fix: 'check KUBECONFIG (or --kubeconfig) and that this identity may read nodes, pods, secrets and webhook configurations',
    };
  return { check: 'API server', verdict: 'ok', summary: `reachable, Kubernetes ${f.apiServer.version}` };
}

/** Is the serving certificate signed by a CA of every webhook's caBundle, and are both in date? */
function judgeServingCert(f: DoctorFacts, hooks: readonly WebhookFacts[], fix: string): Finding[] {
  if (failed(f.servingCertPem))
    return [
      {
        check: 'certificates',
        verdict: 'warn',
        summary: `cannot read the webhook's serving certificate: ${f.servingCertPem.error}`,
      },
    ];
  const serving = f.servingCertPem ? certificates(f.servingCertPem)[0] : undefined;
  if (!serving) return [];
  const out: Finding[] = [];
  for (const w of hooks) {
    const ca = issuerIn(serving, certificates(w.caBundlePem));
    if (!ca) {
      out.push({
        check: 'certificates',
        verdict: 'fail',
        summary: `${w.hook}: the webhook's serving certificate (issuer ${serving.issuer}) is not signed by any CA of its caBundle; the API server refuses every call`,
        fix,
      });
      continue;
    }
    const e = expiry(ca, f.now, `${w.hook}'s CA`, fix);
    if (e && !out.some((o) => o.summary === e.summary)) out.push(e);
  }
  const e = expiry(serving, f.now, "the webhook's serving certificate", fix);
  if (e) out.push(e);
  return out;
}

export function judgeWebhooks(f: DoctorFacts): Finding[] {
  const check = 'webhooks';
  if (failed(f.webhooks))
    return [{ check, verdict: 'fail', summary: `cannot list webhook configurations: ${f.webhooks.error}` }];
  const fix = restartControlPlane(f.namespace, 'it registers them and their caBundle at start');
  const out: Finding[] = [];
  for (const kind of ['mutating', 'validating'] as const) {
    if (!f.webhooks.some((w) => w.kind === kind))
      out.push({
        check,
        verdict: 'fail',
        summary: `no ${kind} webhook configuration labelled app.kubernetes.io/managed-by=vcuda: pods get no vcuda admission`,
        fix,
      });
  }
  const withBundle = f.webhooks.filter((w) => certificates(w.caBundlePem).length > 0);
  for (const w of f.webhooks.filter((x) => !withBundle.includes(x)))
    out.push({
      check,
      verdict: 'fail',
      summary: `${w.hook} has no usable caBundle: the API server cannot trust it`,
      fix,
    });
  out.push(...judgeServingCert(f, withBundle, fix));
  if (out.length > 0) return out;
  const names = [...new Set(f.webhooks.map((w) => w.configName))].join(', ');
  const how = f.servingCertPem ? 'serving certificate valid and trusted' : 'no serving-certificate Secret to compare';
  return [{ check, verdict: 'ok', summary: `registered (${names}); ${how}` }];
}

export function judgeNodeAgents(f: DoctorFacts): Finding[] {
  const check = 'node agents';
  if (failed(f.nodes)) return [{ check, verdict: 'fail', summary: `cannot list nodes: ${f.nodes.error}` }];
  const agents = f.nodes.filter((n) => n.hasInventory);
  // A node agent in DRA mode publishes a ResourceSlice instead of an inventory (dra-judge.ts checks it).
  const draNodes = sliceNodesOf(f.dra);
  const logs = (node: string) =>
    `kubectl -n ${f.namespace} get pods -l app.kubernetes.io/name=vcuda-node-agent --field-selector spec.nodeName=${node}; then kubectl logs on that pod`;
  const out: Finding[] = [];
  if (agents.length === 0 && draNodes.size === 0)
    out.push({
      check,
      verdict: 'fail',
      summary: 'no node has a vcuda inventory: no node agent is running, so no pod can get a card',
      fix: `kubectl -n ${f.namespace} get ds/vcuda-node-agent; label GPU nodes vcuda.io/node=true`,
    });
  for (const n of agents) {
    const age = n.heartbeat ? f.now.getTime() - Date.parse(n.heartbeat) : Number.NaN;
    if (age <= f.heartbeatStaleMs) continue;
    const seen = Number.isNaN(age) ? 'no readable heartbeat' : `last heartbeat ${Math.round(age / 1000)} s ago`;
    out.push({
      check,
      verdict: 'fail',
      summary: `${n.name}: ${seen} (limit ${Math.round(f.heartbeatStaleMs / 1000)} s); the extender places nothing there`,
      fix: logs(n.name),
    });
  }
  for (const n of f.nodes.filter((x) => x.gpuLabelled && !x.hasInventory && !draNodes.has(x.name)))
    out.push({
      check,
      verdict: 'warn',
      summary: `${n.name} is labelled vcuda.io/node=true but has no node agent inventory`,
      fix: logs(n.name),
    });
  const dra = draNodes.size ? `${draNodes.size} node(s) in DRA mode (ResourceSlices, checked under DRA)` : '';
  const extender = `${agents.length} node(s) reporting, heartbeats fresh`;
  const summary = agents.length === 0 ? dra : dra ? `${extender}; ${dra}` : extender;
  return out.length ? out : [{ check, verdict: 'ok', summary }];
}

function parseJwks(text: string): Record<string, unknown>[] | undefined {
  try {
    const keys = (JSON.parse(text) as { keys?: unknown }).keys;
    return Array.isArray(keys) ? (keys as Record<string, unknown>[]) : undefined;
  } catch {
    return undefined;
  }
}

/** RFC 7518 private or symmetric key members: none may be published. */
const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

export function judgeJwks(f: DoctorFacts): Finding {
  const check = 'signing keys';
  const fix = restartControlPlane(f.namespace, 'it publishes the key set at start');
  if (failed(f.jwks))
    return { check, verdict: 'fail', summary: `cannot read the vcuda-jwks ConfigMap: ${f.jwks.error}`, fix };
  if (f.jwks.jwks === undefined)
    return {
      check,
      verdict: 'fail',
      summary: 'no vcuda-jwks ConfigMap: node agents cannot verify any assignment',
      fix,
    };
  const keys = parseJwks(f.jwks.jwks);
  if (!keys) return { check, verdict: 'fail', summary: 'vcuda-jwks is not a JSON key set ({"keys":[...]})', fix };
  if (keys.length === 0) return { check, verdict: 'fail', summary: 'the published key set is empty', fix };
  const privateKey = keys.find((k) => PRIVATE_JWK_MEMBERS.some((m) => m in k));
  if (privateKey)
    return {
      check,
      verdict: 'fail',
      summary: `the published key set holds a PRIVATE key (kid ${String(privateKey['kid'])}): anyone on a node can sign assignments`,
      fix: `generate new signing keys, replace Secret ${f.namespace}/vcuda-signing-keys, then ${fix}`,
    };
  const published = new Set(keys.map((k) => String(k['kid'])));
  const kids = f.jwks.assignmentKids;
  if (failed(kids))
    return {
      check,
      verdict: 'warn',
      summary: `${keys.length} public key(s) published; cannot read pods: ${kids.error}`,
    };
  const stale = [...new Set(kids)].filter((kid) => !published.has(kid));
  if (stale.length > 0)
    return {
      check,
      verdict: 'fail',
      summary: `assignments are signed with key(s) ${stale.join(', ')} that vcuda-jwks does not publish: node agents refuse them`,
      fix,
    };
  const signed = kids.length ? `; every running assignment (${kids.length}) names one of them` : '';
  return { check, verdict: 'ok', summary: `${keys.length} public key(s) published${signed}` };
}

/** How many Pending pods are shown, one line each. */
export const PENDING_SHOWN = 5;

export function judgePendingPods(f: DoctorFacts): Finding[] {
  const check = 'pending pods';
  const p = f.pendingPods;
  if (failed(p)) return [{ check, verdict: 'warn', summary: `cannot list vcuda pods: ${p.error}` }];
  if (p.length === 0) return [{ check, verdict: 'ok', summary: 'no vcuda pod is Pending' }];
  const shown = p.slice(0, PENDING_SHOWN).map((pod): Finding => {
    const age = pod.createdAt ? ` for ${Math.round((f.now.getTime() - Date.parse(pod.createdAt)) / 1000)} s` : '';
    const why = pod.lastWarning ?? 'no warning event yet';
    return {
      check,
      verdict: 'warn',
      summary: `${pod.namespace}/${pod.name} Pending${age} (scheduler ${pod.schedulerName}): ${why}`,
      fix: `kubectl -n ${pod.namespace} describe pod ${pod.name}`,
    };
  });
  const more =
    p.length > PENDING_SHOWN
      ? [{ check, verdict: 'warn' as const, summary: `and ${p.length - PENDING_SHOWN} more` }]
      : [];
  return [...shown, ...more];
}

/**
 * GPU pods that reached a node without vcuda placing them: the node agent refused their devices,
 * so the kubelet failed them at admission. They hold nothing, but their owners wait for nothing.
 */
export function judgeUnplacedPods(f: DoctorFacts): Finding[] {
  const check = 'unplaced GPU pods';
  const p = f.unplacedPods;
  if (p === undefined) return [];
  if (failed(p)) return [{ check, verdict: 'warn', summary: `cannot list failed pods: ${p.error}` }];
  if (p.length === 0) return [{ check, verdict: 'ok', summary: 'no GPU pod was failed at admission' }];
  const shown = p.slice(0, PENDING_SHOWN).map(
    (pod): Finding => ({
      check,
      verdict: 'warn',
      summary: `${pod.namespace}/${pod.name} on ${pod.node} failed at admission: ${pod.message.slice(0, 300)}`,
      fix:
        `kubectl -n ${pod.namespace} delete pod ${pod.name}; create it again without spec.nodeName, ` +
        "in a namespace vcuda's webhook admits, so that vcuda places it",
    }),
  );
  const more =
    p.length > PENDING_SHOWN
      ? [{ check, verdict: 'warn' as const, summary: `and ${p.length - PENDING_SHOWN} more` }]
      : [];
  return [...shown, ...more];
}

export function judgeControlPlane(f: DoctorFacts): Finding {
  const check = 'control plane';
  if (!f.readiness) return { check, verdict: 'skip', summary: 'give --url to check the control plane and its ledger' };
  const pods = `kubectl -n ${f.namespace} get pods -l app.kubernetes.io/name=vcuda-control-plane`;
  if (failed(f.readiness))
    return { check, verdict: 'fail', summary: `/readyz not reachable: ${f.readiness.error}`, fix: pods };
  if (f.readiness.status === 200)
    return { check, verdict: 'ok', summary: 'ready: ledger reachable, watch cache synced' };
  const body = f.readiness.body.trim().slice(0, 300);
  const ledger = /ledger|database|postgres/i.test(body);
  return {
    check: ledger ? 'ledger' : check,
    verdict: 'fail',
    summary: `control plane not ready (HTTP ${f.readiness.status}): ${body}`,
    fix: ledger
      ? 'check the control plane\'s DATABASE_URL and that PostgreSQL answers; then "vcuda doctor --database-url ..."'
      : `${pods}; kubectl -n ${f.namespace} logs deploy/vcuda-control-plane`,
  };
}

export function judgeMigrations(f: DoctorFacts): Finding {
  const check = 'ledger migrations';
  const m = f.migrations;
  if (!m) return { check, verdict: 'skip', summary: 'give --database-url to compare applied migrations' };
  if (failed(m))
    return {
      check,
      verdict: 'fail',
      summary: `cannot read the ledger: ${m.error}`,
      fix: 'check the url, that PostgreSQL answers, and that this user may read schema drizzle',
    };
  const last = Math.max(-1, ...m.appliedMillis);
  const pending = m.known.filter((x) => x.millis > last);
  const newest = m.known.at(-1)?.millis ?? -1;
  if (pending.length > 0) {
    const tags = pending.map((x) => x.tag);
    const named = tags.length > 4 ? [...tags.slice(0, 2), '…', tags.at(-1)] : tags;
    return {
      check,
      verdict: 'fail',
      summary: `${pending.length} of ${m.known.length} migration(s) not applied: ${named.join(', ')}`,
      fix: 'vcuda db migrate --database-url <the same url> (safe while the control plane runs)',
    };
  }
  if (last > newest)
    return {
      check,
      verdict: 'warn',
      summary: 'the ledger has migrations this vcuda does not know: it is older than the control plane',
      fix: 'run the doctor of the version the control plane runs',
    };
  return { check, verdict: 'ok', summary: `all ${m.known.length} migrations applied` };
}

function refusesAnonymous(a: AnonymousAnswer): boolean {
  return 'handshakeRefused' in a || a.status === 401 || a.status === 403;
}

function judgeAuthenticated(e: ExtenderFacts, f: DoctorFacts): Finding[] {
  const check = 'scheduler extender';
  const r = e.withClientCert;
  const out: Finding[] = [];
  if (r && (failed(r) || r.status !== 200)) {
    const why = failed(r) ? r.error : `HTTP ${r.status} ${r.body.trim().slice(0, 200)}`;
    out.push({
      check,
      verdict: 'fail',
      summary: `the scheduler's client certificate was refused: ${why}; kube-scheduler cannot place vcuda pods`,
      fix: e.url.startsWith('http:')
        ? `${e.url} is plain HTTP, where every extender call is refused: point --extender-url at the extender's TLS port (https://…:8444)`
        : failed(r) || r.status === 401
          ? `the certificate must be signed by the CA the extender trusts (Secret ${f.namespace}/vcuda-extender-tls, ca.crt)`
          : 'the certificate must name a client of extender.allowedClients (default vcuda-scheduler) as CN or DNS name',
    });
  }
  const cert = e.clientCertPem ? certificates(e.clientCertPem)[0] : undefined;
  const renew = restartControlPlane(f.namespace, 'it re-issues the client certificate before it expires');
  const ex = cert && expiry(cert, f.now, "the scheduler's client certificate", renew);
  if (ex) out.push(ex);
  return out;
}

export function judgeExtender(f: DoctorFacts): Finding[] {
  const check = 'scheduler extender';
  const e = f.extender;
  if (!e)
    return [{ check, verdict: 'skip', summary: 'give --extender-url to check the extender and its authentication' }];
  if (failed(e.anonymous))
    return [
      {
        check,
        verdict: 'fail',
        summary: `${e.url} not reachable: ${e.anonymous.error}`,
        fix: `kube-scheduler cannot place vcuda pods: check the control-plane pods and the Service's extender port (kubectl -n ${f.namespace} get svc,endpoints vcuda-control-plane)`,
      },
    ];
  const out: Finding[] = [];
  const a = e.anonymous;
  if (!refusesAnonymous(a)) {
    const status = 'status' in a ? a.status : 0;
    const answered = status === 200 || status === 400;
    out.push({
      check,
      verdict: 'fail',
      summary: answered
        ? `${e.url} answered HTTP ${status} to a caller without a client certificate: anyone who reaches it can bind pods`
        : `${e.url} answered HTTP ${status}: is this the extender port?`,
      fix: answered
        ? 'serve the extender only on its TLS port with client certificates (deploy/README.md, "Who can call what")'
        : `point --extender-url at the Service's extender port (https://…:8444)`,
    });
  }
  out.push(...judgeAuthenticated(e, f));
  if (out.length) return out;
  const how = 'handshakeRefused' in a ? 'in the TLS handshake' : `with HTTP ${a.status}`;
  const cert =
    e.withClientCert === undefined
      ? '; client certificate not checked (give --extender-cert and --extender-key)'
      : "; accepts the scheduler's client certificate";
  return [{ check, verdict: 'ok', summary: `refuses callers without a client certificate (${how})${cert}` }];
}

export function judgeAll(f: DoctorFacts): Finding[] {
  // Without the API server every cluster check would repeat its error.
  const cluster = failed(f.apiServer)
    ? []
    : [
        ...judgeWebhooks(f),
        ...judgeNodeAgents(f),
        judgeJwks(f),
        ...judgePendingPods(f),
        ...judgeUnplacedPods(f),
        ...judgeDra(f.dra, f.nodes, f),
      ];
  return [judgeApiServer(f), ...cluster, judgeControlPlane(f), judgeMigrations(f), ...judgeExtender(f)];
}

export const hasFailure = (findings: readonly Finding[]) => findings.some((x) => x.verdict === 'fail');

export function formatFindings(findings: readonly Finding[]): string {
  const problems = findings.filter((x) => x.verdict === 'fail' || x.verdict === 'warn').length;
  const width = Math.max(...findings.map((x) => x.check.length));
  const lines = findings.flatMap((x) => [
    `  ${x.verdict.padEnd(4)}  ${x.check.padEnd(width)}  ${x.summary}`,
    ...(x.fix && x.verdict !== 'ok' ? [`  ${''.padEnd(4)}  ${''.padEnd(width)}  fix: ${x.fix}`] : []),
  ]);
  const head = problems === 0 ? 'vcuda doctor: no problems found' : `vcuda doctor: ${problems} problem(s)`;
  return `${head}\n${lines.join('\n')}\n`;
}
