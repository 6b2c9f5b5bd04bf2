/**
 * The Mutating- and ValidatingWebhookConfiguration the control plane keeps current. Building them
 * is pure (config, resource names, caBundle, API server version); `ensureWebhookRegistration`
 * creates or replaces them through a narrow client and checks what the API server stored.
 *
 * Scoping, so pods that do not use vcuda never depend on it being up:
 * - API servers with matchConditions (from `matchConditionsFromMinor`): one webhook per kind,
 *   failurePolicy Fail, and a CEL condition that selects pods naming a vcuda resource.
 * - Older ones (1.26): the validating hook selects pods labelled `vcuda.io/gpu` (the mutating hook
 *   sets it) with Fail; the mutating hook is Fail in namespaces labelled `vcuda.io/admission=enforce`
 *   and Ignore everywhere else (it cannot select by a label the pod does not carry yet).
 */
import { type ResourceNames, VcudaError } from '../contract/index.js';
import type { RegistrationConfig } from './config.js';
import { VCUDA_POD_LABEL } from './mutate.js';
import { frozenUserKeys } from './validate.js';

export const NAMESPACE_ENFORCE_LABEL = 'vcuda.io/admission';
export const NAMESPACE_ENFORCE_VALUE = 'enforce';
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';
export const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'vcuda' };

export type ServerVersion = { major: number; minor: number };
export type Scoping = 'match-conditions' | 'selectors';

type LabelSelector = {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }[];
};

export type Webhook = {
  name: string;
  clientConfig: {
    url?: string;
    service?: { namespace: string; name: string; path: string; port: number };
    caBundle: string;
  };
  rules: { operations: string[]; apiGroups: string[]; apiVersions: string[]; resources: string[]; scope: string }[];
  failurePolicy: 'Fail' | 'Ignore';
  matchPolicy: 'Equivalent';
  namespaceSelector: LabelSelector;
  objectSelector: LabelSelector;
  sideEffects: 'None' | 'NoneOnDryRun';
  timeoutSeconds: number;
  admissionReviewVersions: string[];
  matchConditions?: { name: string; expression: string }[];
  reinvocationPolicy?: 'Never';
};

export type WebhookConfiguration = {
  apiVersion: 'admissionregistration.k8s.io/v1';
  kind: 'MutatingWebhookConfiguration' | 'ValidatingWebhookConfiguration';
  metadata: { name: string; labels: Record<string, string>; resourceVersion?: string };
  webhooks: Webhook[];
};

/** `{major:"1", minor:"26+"}` (managed clusters add a `+`) to numbers; unreadable -> undefined. */
export function parseServerVersion(info: { major?: string; minor?: string }): ServerVersion | undefined {
  const major = Number.parseInt(info.major ?? '', 10);
  const minor = Number.parseInt(info.minor ?? '', 10);
  return Number.isInteger(major) && Number.isInteger(minor) ? { major, minor } : undefined;
}

export function chooseScoping(
  version: ServerVersion,
  config: Pick<RegistrationConfig, 'matchConditionsFromMinor'>,
): Scoping {
  return version.major > 1 || version.minor >= config.matchConditionsFromMinor ? 'match-conditions' : 'selectors';
}

/** CEL: does any container (init included) name a vcuda resource in limits or requests? */
export function requestsVcudaExpression(names: ResourceNames): string {
  const inMap = (map: string) =>
    `(has(c.resources.${map}) && ('${names.core}' in c.resources.${map} || '${names.memory}' in c.resources.${map}))`;
  const any = (list: string) => `${list}.exists(c, has(c.resources) && (${inMap('limits')} || ${inMap('requests')}))`;
  // `has(...) && ...` rather than a ternary with `[]`: the type checker needs no list unification.
  return `(has(object.spec.initContainers) && ${any('object.spec.initContainers')}) || ${any('object.spec.containers')}`;
}

/** A CEL string literal. */
function celString(s: string): string {
  return `'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/**
 * True unless the request is an UPDATE by one of vcuda's own components that leaves every frozen
 * user knob as it was: the validating webhook would allow exactly that (privileged users may
 * change `vcuda.io/` annotations; nobody may change the knobs), so the API server need not call it
 * for the agent's and control plane's own annotation writes.
 */
export function componentUpdateExpression(names: ResourceNames, privilegedUsernames: readonly string[]): string {
  const users = `[${privilegedUsernames.map(celString).join(', ')}]`;
  const holds = (obj: string) => `(has(${obj}.metadata.annotations) && k in ${obj}.metadata.annotations)`;
  const knobs = `[${frozenUserKeys(names).map(celString).join(', ')}]`;
  const changed = `${knobs}.exists(k, ${holds('object')} != ${holds('oldObject')} || (${holds('object')} && object.metadata.annotations[k] != oldObject.metadata.annotations[k]))`;
  return `request.operation != 'UPDATE' || !(request.userInfo.username in ${users}) || ${changed}`;
}

export type RegistrationInput = {
  config: RegistrationConfig;
  names: ResourceNames;
  /** vcuda's own components: with match conditions, their updates that keep the user knobs skip validation. */
  privilegedUsernames?: readonly string[];
  /** PEM bundle the API server trusts for the webhook's serving certificate. */
  caBundlePem: string;
  scoping: Scoping;
  /**
   * DRA mode for pods (`webhook.dra.convertPods`): the mutating hook creates ResourceClaimTemplates,
   * so it declares `NoneOnDryRun` (it writes nothing on a dry run) instead of `None`.
   */
  createsClaimTemplates?: boolean;
};

export function clientConfig(config: RegistrationConfig, path: string, caBundlePem: string): Webhook['clientConfig'] {
  const caBundle = Buffer.from(caBundlePem).toString('base64');
  if (config.url) return { url: `${config.url.replace(/\/+$/, '')}${path}`, caBundle };
  const { serviceNamespace: namespace, serviceName: name, servicePort: port } = config;
  return { service: { namespace, name, path, port }, caBundle };
}

function podRules(operations: string[]): Webhook['rules'] {
  return [{ operations, apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], scope: 'Namespaced' }];
}

type HookBase = (
  name: string,
  path: string,
  operations: string[],
) => Omit<Webhook, 'failurePolicy' | 'namespaceSelector'>;
type Exempt = NonNullable<LabelSelector['matchExpressions']>;

/** The namespaces whose objects never go to the webhooks, as a namespace selector's expressions. */
export function exemptExpressions(config: RegistrationConfig): Exempt {
  return config.exemptNamespaces.length
    ? [{ key: NAMESPACE_NAME_LABEL, operator: 'NotIn', values: [...config.exemptNamespaces].sort() }]
    : [];
}
type HookSet = { mutatingHooks: Webhook[]; validatingHooks: Webhook[] };

/** What every hook shares: where to call, which pods, and the fields the API server would default. */
function hookBaseOf(config: RegistrationConfig, caBundlePem: string): HookBase {
  return (name, path, operations) => ({
    name,
    clientConfig: clientConfig(config, path, caBundlePem),
    rules: podRules(operations),
    matchPolicy: 'Equivalent' as const,
    sideEffects: 'None' as const,
    timeoutSeconds: config.timeoutSeconds,
    admissionReviewVersions: ['v1'],
    objectSelector: {},
  });
}

/** 1.28+: match conditions pick the pods that ask for vcuda resources, in every namespace. */
function matchConditionHooks(input: RegistrationInput, base: HookBase, exempt: Exempt): HookSet {
  const { names, privilegedUsernames = [] } = input;
  const conditions = [{ name: 'requests-vcuda-resources', expression: requestsVcudaExpression(names) }];
  const mutatingHooks: Webhook[] = [
    {
      ...base('mutate.pods.vcuda.io', '/admission/mutate', ['CREATE']),
      failurePolicy: 'Fail',
      namespaceSelector: { matchExpressions: exempt },
      matchConditions: conditions,
      reinvocationPolicy: 'Never',
    },
  ];
  const validatingHooks: Webhook[] = [
    {
      ...base('validate.pods.vcuda.io', '/admission/validate', ['CREATE', 'UPDATE']),
      failurePolicy: 'Fail',
      namespaceSelector: { matchExpressions: exempt },
      matchConditions: privilegedUsernames.length
        ? [
            ...conditions,
            { name: 'not-a-component-update', expression: componentUpdateExpression(names, privilegedUsernames) },
          ]
        : conditions,
    },
  ];
  return { mutatingHooks, validatingHooks };
}

/** 1.26/1.27: no match conditions, so the namespace's enforce label and the pod's vcuda label scope the hooks. */
function selectorHooks(base: HookBase, exempt: Exempt): HookSet {
  const enforce = { key: NAMESPACE_ENFORCE_LABEL, values: [NAMESPACE_ENFORCE_VALUE] };
  const mutatingHooks: Webhook[] = [
    {
      ...base('mutate.pods.vcuda.io', '/admission/mutate', ['CREATE']),
      failurePolicy: 'Fail',
      namespaceSelector: { matchExpressions: [{ ...enforce, operator: 'In' }, ...exempt] },
      reinvocationPolicy: 'Never',
    },
    {
      // Fails open: a namespace without the enforce label cannot be told apart from one that does
      // not run vcuda pods on 1.26/1.27 (no match conditions), and must not depend on the webhook.
      ...base('mutate-unlabelled-namespaces.pods.vcuda.io', '/admission/mutate', ['CREATE']),
      failurePolicy: 'Ignore',
      namespaceSelector: { matchExpressions: [{ ...enforce, operator: 'NotIn' }, ...exempt] },
      reinvocationPolicy: 'Never',
    },
  ];
  const validatingHooks: Webhook[] = [
    {
      ...base('validate.pods.vcuda.io', '/admission/validate', ['CREATE', 'UPDATE']),
      failurePolicy: 'Fail',
      namespaceSelector: { matchExpressions: exempt },
      objectSelector: { matchExpressions: [{ key: VCUDA_POD_LABEL, operator: 'Exists' }] },
    },
  ];
  return { mutatingHooks, validatingHooks };
}

/** Both configuration objects, complete (every defaultable field set, so comparing is exact). */
export function buildWebhookConfigurations(input: RegistrationInput): {
  mutating: WebhookConfiguration;
  validating: WebhookConfiguration;
} {
  const { config, caBundlePem, scoping } = input;
  const exempt = exemptExpressions(config);
  const base = hookBaseOf(config, caBundlePem);
  const hooks = scoping === 'match-conditions' ? matchConditionHooks(input, base, exempt) : selectorHooks(base, exempt);
  const { validatingHooks } = hooks;
  const mutatingHooks = input.createsClaimTemplates
    ? hooks.mutatingHooks.map((h) => ({ ...h, sideEffects: 'NoneOnDryRun' as const }))
    : hooks.mutatingHooks;
  const metadata = (suffix: string) => ({ name: `${config.name}-${suffix}`, labels: { ...MANAGED_BY } });
  return {
    mutating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: metadata('mutate-pods'),
      webhooks: mutatingHooks,
    },
    validating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: metadata('validate-pods'),
      webhooks: validatingHooks,
    },
  };
}

/** True when every field `want` sets has the same value in `have` (the API server adds defaults). */
export function isSubsetOf(want: unknown, have: unknown): boolean {
  if (Array.isArray(want)) {
    return Array.isArray(have) && want.length === have.length && want.every((w, i) => isSubsetOf(w, have[i]));
  }
  if (want !== null && typeof want === 'object') {
    if (have === null || typeof have !== 'object' || Array.isArray(have)) return false;
    const h = have as Record<string, unknown>;
    return Object.entries(want as Record<string, unknown>).every(([k, v]) => {
      // An empty selector and an absent one mean the same to the API server.
      if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0) {
        return h[k] === undefined || isSubsetOf(v, h[k]);
      }
      if (Array.isArray(v) && v.length === 0 && h[k] === undefined) return true;
      return isSubsetOf(v, h[k]);
    });
  }
  return want === have;
}

/** A configuration as read back from the API server (with its defaults and resourceVersion). */
export type StoredConfiguration = {
  metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> };
  webhooks?: unknown[];
};

/** What registration needs from the API server; `kube-adapters.ts` implements it with client-node. */
export type WebhookConfigurationClient = {
  serverVersion(): Promise<{ major?: string; minor?: string; gitVersion?: string }>;
  read(kind: WebhookConfiguration['kind'], name: string): Promise<StoredConfiguration | undefined>;
  /** Throws a VcudaError with code `conflict` when it already exists. */
  create(obj: WebhookConfiguration): Promise<StoredConfiguration>;
  /** Throws a VcudaError with code `conflict` when `metadata.resourceVersion` is stale. */
  replace(obj: WebhookConfiguration): Promise<StoredConfiguration>;
};

export type EnsureAction = 'created' | 'updated' | 'unchanged';

export type RegistrationOutcome = {
  serverVersion: string;
  scoping: Scoping;
  mutating: EnsureAction;
  validating: EnsureAction;
  /** Why the scoping differs from what the version suggested, when it does. */
  note?: string;
  /** The claim hooks' configurations, when they are registered (claim-registration.ts). */
  claims?: { mutating: EnsureAction; validating: EnsureAction };
};

function isConflict(err: unknown): boolean {
  return err instanceof VcudaError && err.code === 'conflict';
}

export async function ensureOne(
  client: WebhookConfigurationClient,
  want: WebhookConfiguration,
): Promise<{ action: EnsureAction; stored: StoredConfiguration }> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const stored = await client.read(want.kind, want.metadata.name);
    try {
      if (!stored) return { action: 'created', stored: await client.create(want) };
      const same =
        isSubsetOf(want.webhooks, stored.webhooks) &&
        isSubsetOf(want.metadata.labels, stored.metadata?.labels) &&
        // Selectors mode omits matchConditions (1.26 does not know them): stale ones must go too.
        want.webhooks.every((w, i) => w.matchConditions || !hasMatchConditions(stored.webhooks?.[i]));
      if (same) return { action: 'unchanged', stored };
      const next = { ...want, metadata: { ...want.metadata, resourceVersion: stored.metadata?.resourceVersion } };
      return { action: 'updated', stored: await client.replace(next) };
    } catch (err) {
      // Another replica wrote it between our read and write: read again and compare.
      if (!isConflict(err)) throw err;
    }
  }
  throw new VcudaError('unavailable', `${want.kind} ${want.metadata.name} kept changing under concurrent writers`);
}

function hasMatchConditions(webhook: unknown): boolean {
  const conditions = (webhook as { matchConditions?: unknown } | undefined)?.matchConditions;
  return Array.isArray(conditions) && conditions.length > 0;
}

function keptMatchConditions(stored: StoredConfiguration): boolean {
  return (stored.webhooks ?? []).every(hasMatchConditions);
}

/**
 * Creates or updates both configurations for this API server. Call it after
 * `ensureServingCertificate`, with the bundle just read from the shared Secret, so a replica never
 * writes back a stale caBundle.
 */
export async function ensureWebhookRegistration(
  client: WebhookConfigurationClient,
  input: Omit<RegistrationInput, 'scoping'>,
): Promise<RegistrationOutcome> {
  const info = await client.serverVersion();
  const version = parseServerVersion(info);
  const serverVersion = info.gitVersion ?? `${info.major ?? '?'}.${info.minor ?? '?'}`;
  // An unreadable version gets the selectors, which every v1 API server accepts.
  let scoping: Scoping = version ? chooseScoping(version, input.config) : 'selectors';
  let note: string | undefined;
  let built = buildWebhookConfigurations({ ...input, scoping });
  let mutating = await ensureOne(client, built.mutating);
  let validating = await ensureOne(client, built.validating);
  if (
    scoping === 'match-conditions' &&
    !(keptMatchConditions(mutating.stored) && keptMatchConditions(validating.stored))
  ) {
    // The feature gate is off: the server dropped the conditions, so Fail would now cover every pod.
    scoping = 'selectors';
    note = `API server ${serverVersion} dropped matchConditions; using selectors`;
    built = buildWebhookConfigurations({ ...input, scoping });
    mutating = await ensureOne(client, built.mutating);
    validating = await ensureOne(client, built.validating);
  }
  return {
    serverVersion,
    scoping,
    mutating: mutating.action,
    validating: validating.action,
    ...(note ? { note } : {}),
  };
}
