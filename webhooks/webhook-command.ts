/**
 * `vcuda webhook manifests`: the two webhook configurations as YAML (four with `--claims`: the
 * DRA claim hooks), for clusters where the manifests (not the control plane) register them. `vcuda webhook check POD.yaml`: what admission
 * would answer for a pod, without a cluster: the refusal message, or the patched pod's vcuda parts
 * (with `--dra`, the claims and the ResourceClaimTemplates the control plane would make).
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import fastJsonPatch from 'fast-json-patch';
import { stringify as toYaml } from 'yaml';
import { DEFAULT_DRA_DRIVER, parseManifestText, resourceNames, ValidationError } from '../contract/index.js';
import type { AdmissionReviewOut } from './admission-review.js';
import { type AdmissionRoutesDeps, admissionRoutes } from './admission-routes.js';
import { buildClaimWebhookConfigurations } from './claim-registration.js';
import { registrationConfigSchema, webhookConfigSchema } from './config.js';
import type { ClaimTemplate } from './pod-claims.js';
import { buildWebhookConfigurations, chooseScoping, parseServerVersion } from './registration.js';

export type ManifestOptions = {
  serverVersion: string;
  url?: string | undefined;
  caBundlePem: string;
  namespace: string;
  service: string;
  port: number;
  domain: string;
  timeoutSeconds: number;
  /** Also the claim hooks' configurations, for this DeviceClass and driver (DRA clusters). */
  claims?: { deviceClassName: string; driverName: string } | undefined;
  /** DRA mode for pods (`webhook.dra.convertPods`): the pods' mutating hook makes claim templates. */
  draPods?: boolean | undefined;
};

export function renderManifests(o: ManifestOptions): string {
  const config = registrationConfigSchema.parse({
    url: o.url,
    serviceNamespace: o.namespace,
    serviceName: o.service,
    servicePort: o.port,
    timeoutSeconds: o.timeoutSeconds,
  });
  const [major = '', minor = ''] = o.serverVersion.replace(/^v/, '').split('.');
  const version = parseServerVersion({ major, minor });
  if (!version) {
    throw ValidationError.forField(
      '--server-version',
      'version',
      `${JSON.stringify(o.serverVersion)} is not MAJOR.MINOR (e.g. 1.26)`,
    );
  }
  const built = buildWebhookConfigurations({
    config,
    names: resourceNames(o.domain, '--domain'),
    caBundlePem: o.caBundlePem,
    scoping: chooseScoping(version, config),
    // The control plane's own default: its and the node agents' updates skip validation.
    privilegedUsernames: webhookConfigSchema.parse({}).privilegedUsernames,
    ...(o.draPods ? { createsClaimTemplates: true } : {}),
  });
  const objects = [built.mutating, built.validating];
  if (o.claims) {
    const claims = buildClaimWebhookConfigurations({ config, claims: o.claims, caBundlePem: o.caBundlePem });
    objects.push(claims.mutating, claims.validating);
  }
  return objects.map((obj) => toYaml(obj)).join('---\n');
}

export type CheckOptions = {
  domain: string;
  memoryUnitMiB: number;
  schedulerName?: string | undefined;
  namespace: string;
  /** DRA mode: the claims, and the templates the control plane would make (for this DeviceClass and driver). */
  dra?: boolean | undefined;
  deviceClass?: string | undefined;
  driver?: string | undefined;
};

type ManifestLike = {
  kind?: string;
  metadata?: { namespace?: string; name?: string };
  spec?: { template?: ManifestLike; jobTemplate?: { spec?: { template?: ManifestLike } } };
};

/** Workload kinds whose pods come from a template: checked as the pods they create. */
const TEMPLATE_KINDS = new Set([
  'Deployment',
  'ReplicaSet',
  'StatefulSet',
  'DaemonSet',
  'Job',
  'ReplicationController',
]);

/** The pod a manifest describes: a Pod itself, or the pod template of a workload. */
export function podOfManifest(doc: unknown, source: string): ManifestLike {
  const m = (doc ?? {}) as ManifestLike;
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new Error(`${source}: expected a Pod manifest (an object with kind: Pod)`);
  const template =
    m.kind === 'CronJob'
      ? m.spec?.jobTemplate?.spec?.template
      : TEMPLATE_KINDS.has(m.kind ?? '')
        ? m.spec?.template
        : m;
  if (m.kind !== undefined && m.kind !== 'Pod' && template === m)
    throw new Error(`${source}: is a ${m.kind}; vcuda webhook check takes a Pod or a workload with a pod template`);
  if (!template) throw new Error(`${source}: the ${m.kind} has no pod template (spec.template)`);
  if (template === m) return m;
  const meta = {
    ...template.metadata,
    namespace: m.metadata?.namespace,
    name: template.metadata?.name ?? m.metadata?.name,
  };
  return { ...template, kind: 'Pod', metadata: meta };
}

/** Runs a pod (or a workload's pod template) through both hooks exactly as the API server would call them. */
export async function checkPod(
  podText: string,
  o: CheckOptions,
  source = 'manifest',
): Promise<{ admitted: boolean; output: string }> {
  const pod = podOfManifest(parseManifestText(podText, source), source);
  const templates: ClaimTemplate[] = [];
  const app = admissionRoutes({
    names: resourceNames(o.domain, '--domain'),
    memoryUnitMiB: o.memoryUnitMiB,
    clusterName: 'check',
    schedulerName: o.schedulerName,
    privilegedUsernames: [],
    maxBodyBytes: 3 * 1024 * 1024,
    logger: { info: () => {}, warn: () => {} },
    draPods: o.dra ? checkDraPods(o, templates) : undefined,
  });
  const namespace = pod?.metadata?.namespace ?? o.namespace;
  const ask = async (hook: 'mutate' | 'validate', object: unknown) => {
    const body = JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: `check-${hook}`,
        kind: { group: '', version: 'v1', kind: 'Pod' },
        operation: 'CREATE',
        namespace,
        name: pod?.metadata?.name,
        userInfo: { username: 'vcuda-check' },
        object,
        // DRA mode: not a dry run, so the templates reach the recorder below (nothing else is written).
        dryRun: !o.dra,
      },
    });
    const res = await app.request(`/${hook}`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' },
    });
    const json = (await res.json()) as AdmissionReviewOut & { error?: { message: string } };
    if (res.status !== 200) throw new Error(json.error?.message ?? `HTTP ${res.status}`);
    return json.response;
  };
  const mutated = await ask('mutate', pod);
  const warnings = (mutated.warnings ?? []).map((w) => `warning: ${w}\n`).join('');
  if (!mutated.allowed) return { admitted: false, output: `${warnings}${mutated.status?.message ?? 'refused'}\n` };
  const patch = mutated.patch ? JSON.parse(Buffer.from(mutated.patch, 'base64').toString('utf8')) : [];
  const patched = fastJsonPatch.applyPatch(structuredClone(pod), patch, true, false).newDocument;
  const validated = await ask('validate', patched);
  if (!validated.allowed) return { admitted: false, output: `${warnings}${validated.status?.message ?? 'refused'}\n` };
  const changes = patch.length ? toYaml(patch) : '(no changes)\n';
  const made = templates.length
    ? `ResourceClaimTemplates the control plane makes:\n${templates.map((t) => toYaml(t)).join('---\n')}`
    : '';
  return { admitted: true, output: `${warnings}admitted; patch:\n${changes}${made}` };
}

/** DRA mode offline: the templates are recorded for the output instead of written to a cluster. */
function checkDraPods(o: CheckOptions, into: ClaimTemplate[]): AdmissionRoutesDeps['draPods'] {
  const deviceClassName = o.deviceClass ?? DEFAULT_DRA_DRIVER;
  return {
    policy: { deviceClassName, driverName: o.driver ?? deviceClassName, modeValue: 'dra' },
    ensureTemplates: async (ts) => void into.push(...ts),
    timeoutMs: 1000,
  };
}

type ManifestFlags = Omit<ManifestOptions, 'caBundlePem' | 'claims'> & {
  draPods?: boolean;
  caFile?: string;
  claims?: boolean;
  deviceClass: string;
  driver: string;
};

export function registerWebhookCommand(program: Command): void {
  const webhook = program
    .command('webhook')
    .description('admission webhooks: configuration manifests, offline pod check');
  webhook
    .command('manifests')
    .description('print the Mutating/ValidatingWebhookConfiguration YAML for an API server version')
    .option('--server-version <v>', 'Kubernetes MAJOR.MINOR of the API server', '1.26')
    .option('--url <url>', 'https://host:port of a control plane outside the cluster (instead of the Service)')
    .option('--ca-file <path>', 'PEM bundle that signed the serving certificate (caBundle)')
    .option('--namespace <ns>', "the control plane's namespace", 'vcuda-system')
    .option('--service <name>', "the control plane's Service", 'vcuda-control-plane')
    .option('--port <n>', 'the Service port', (v) => Number.parseInt(v, 10), 443)
    .option('--domain <domain>', 'resource domain', 'nvidia.com')
    .option('--timeout-seconds <n>', 'webhook timeout', (v) => Number.parseInt(v, 10), 5)
    .option('--claims', 'also the DRA claim hooks (ResourceClaims and templates asking the DeviceClass below)')
    .option('--device-class <name>', 'with --claims: the DeviceClass whose claims vcuda judges', DEFAULT_DRA_DRIVER)
    .option('--driver <name>', 'with --claims: the DRA driver whose opaque config vcuda judges', DEFAULT_DRA_DRIVER)
    .option(
      '--dra-pods',
      "the pods' mutating hook makes claim templates (webhook.dra.convertPods): sideEffects NoneOnDryRun",
    )
    .action((o: ManifestFlags) => {
      const caBundlePem = o.caFile ? readFileSync(o.caFile, 'utf8') : '';
      if (!caBundlePem)
        process.stderr.write('note: no --ca-file; caBundle is empty (the API server then uses its own roots)\n');
      const claims = o.claims ? { deviceClassName: o.deviceClass, driverName: o.driver } : undefined;
      process.stdout.write(renderManifests({ ...o, caBundlePem, claims }));
    });
  webhook
    .command('check')
    .description('run a pod manifest (YAML or JSON) through admission without a cluster')
    .argument('<file>', 'pod manifest, or - for stdin')
    .option('--domain <domain>', 'resource domain', 'nvidia.com')
    .option('--memory-unit-mib <n>', 'size of one vcuda-memory unit', (v) => Number.parseInt(v, 10), 1)
    .option('--scheduler-name <name>', 'scheduler profile the webhook sets on vcuda pods')
    .option('--namespace <ns>', 'namespace when the manifest names none', 'default')
    .option('--dra', 'DRA mode (webhook.dra.convertPods): show the claims and the templates the control plane makes')
    .option('--device-class <name>', 'with --dra: the DeviceClass the claims ask', DEFAULT_DRA_DRIVER)
    .option('--driver <name>', 'with --dra: the DRA driver of the soft limit config (default: the class name)')
    .action(async (file: string, o: CheckOptions) => {
      const text = readFileSync(file === '-' ? 0 : file, 'utf8');
      const { admitted, output } = await checkPod(text, o, file === '-' ? 'stdin' : file);
      process.stdout.write(output);
      if (!admitted) process.exitCode = 1;
    });
}
