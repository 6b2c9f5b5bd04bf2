/**
 * The webhook's slice of the control plane's configuration: one zod schema, defaults filled in
 * here and nowhere else. The control plane's config loader nests `webhookConfigSchema` and passes
 * the parsed, frozen object down; nothing in webhooks/ reads the environment.
 */
import { z } from 'zod';
import { DEFAULT_DRA_DRIVER, DEFAULT_RESOURCE_DOMAIN } from '../contract/index.js';

const KIB = 1024;

export const registrationConfigSchema = z.object({
  /** Prefix of both configuration objects' names and of each webhook's name. */
  name: z.string().min(1).default('vcuda'),
  /** In-cluster: the Service in front of the control plane. Ignored when `url` is set. */
  serviceNamespace: z.string().min(1).default('vcuda-system'),
  serviceName: z.string().min(1).default('vcuda-control-plane'),
  servicePort: z.number().int().min(1).max(65535).default(443),
  /** Outside the cluster (development, tests on loopback): `https://host:port`, no path. */
  url: z.url({ protocol: /^https$/ }).optional(),
  /** Kept short: a slow webhook blocks `kubectl apply`. Kubernetes allows 1..30. */
  timeoutSeconds: z.number().int().min(1).max(30).default(5),
  /**
   * From this API server minor version on, the webhooks are scoped with CEL matchConditions
   * (beta and on by default since 1.28; alpha and off by default in 1.27, where the API server
   * would silently drop them). Below it, selectors scope them.
   */
  matchConditionsFromMinor: z.number().int().min(27).default(28),
  /** Namespaces whose pods never go through the webhooks (the control plane's own, kube-system). */
  exemptNamespaces: z.array(z.string().min(1)).default(['kube-system']),
});

export const certificateConfigSchema = z
  .object({
    /** `self`: issue a CA and a serving certificate into a Secret shared by replicas. `files`: use supplied ones. */
    mode: z.enum(['self', 'files']).default('self'),
    secretNamespace: z.string().min(1).default('vcuda-system'),
    secretName: z.string().min(1).default('vcuda-webhook-tls'),
    validityDays: z.number().int().min(2).max(3650).default(365),
    /** Re-issue when less than this remains; must be below the validity. */
    rotateBeforeDays: z.number().int().min(1).default(30),
    certFile: z.string().optional(),
    keyFile: z.string().optional(),
    /** The CA that signed certFile (its PEM goes into caBundle); defaults to certFile itself. */
    caFile: z.string().optional(),
  })
  .refine((c) => c.rotateBeforeDays < c.validityDays, {
    path: ['rotateBeforeDays'],
    message: 'must be below validityDays',
  })
  .refine((c) => c.mode !== 'files' || (c.certFile && c.keyFile), {
    path: ['certFile'],
    message: 'mode "files" needs certFile and keyFile',
  });

/**
 * How the webhook port tells the API server from anyone else who reaches it. kube-apiserver
 * presents what its AdmissionConfiguration's `kubeConfigFile` gives for this webhook's host: a
 * client certificate, or a bearer token. Reviews are answered whoever asks; only an authenticated
 * caller's reviews leave Events, refusal log lines and dashboard rows. With neither set, none do.
 */
export const callerConfigSchema = z.object({
  /** PEM CA bundle that signs the API server's client certificate (kubeadm: /etc/kubernetes/pki/ca.crt). */
  clientCAFile: z.string().min(1).optional(),
  /** The certificate must name one of these (subject CN or DNS SAN). */
  allowedNames: z.array(z.string().min(1)).min(1).default(['kube-apiserver-kubelet-client']),
  /** A file holding the bearer token the API server presents (kubeconfig `users[].user.token`). */
  tokenFile: z.string().min(1).optional(),
});

/** Which ResourceClaims are vcuda's: those asking its DeviceClass, or carrying an opaque config for its driver. */
export const claimAdmissionConfigSchema = z.object({
  deviceClassName: z.string().min(1).default(DEFAULT_DRA_DRIVER),
  driverName: z.string().min(1).default(DEFAULT_DRA_DRIVER),
  /**
   * Register the claim hooks' configurations (`<name>-mutate-claims`, `<name>-validate-claims`)
   * beside the pods' ones: DRA clusters (resource.k8s.io/v1 served). The DRA overlay turns it on.
   */
  register: z.boolean().default(false),
});

/**
 * Pods written for vcuda today, moved to DRA at admission (pod-claims.ts): their vcuda resources
 * become claims from ResourceClaimTemplates the mutating hook keeps in the pod's namespace.
 */
export const draPodConfigSchema = z.object({
  /** On where the control plane serves the cluster (or its `modeLabel` nodes) through DRA. */
  convertPods: z.boolean().default(false),
  /**
   * Unset: every vcuda pod is converted. Set (e.g. `gpu.vcuda.io/mode`): only pods whose
   * `spec.nodeSelector` gives it `modeValue`; the others stay with the extender.
   */
  modeLabel: z.string().min(1).max(317).optional(),
  modeValue: z.string().min(1).max(63).default('dra'),
  /** How long admission waits for the templates to be created; past it the pod is refused (retry). */
  templateTimeoutMs: z.number().int().min(100).max(10_000).default(2000),
});

export const webhookConfigSchema = z.object({
  resourceDomain: z.string().min(1).default(DEFAULT_RESOURCE_DOMAIN),
  memoryUnitMiB: z.number().int().min(1).default(1),
  clusterName: z.string().min(1).default('default'),
  /** Set on vcuda pods that use `default-scheduler` (or none), so the extender sees them. */
  schedulerName: z.string().min(1).optional(),
  /**
   * Users allowed to add, change or remove `vcuda.io/` annotations on existing pods: the control
   * plane's and node agent's service accounts. Everyone else is refused by the validating hook.
   */
  privilegedUsernames: z
    .array(z.string().min(1))
    .default([
      'system:serviceaccount:vcuda-system:vcuda-control-plane',
      'system:serviceaccount:vcuda-system:vcuda-node-agent',
    ]),
  /** Larger AdmissionReview bodies get HTTP 400 before parsing (the API server's own limit is 3 MiB). */
  maxBodyBytes: z
    .number()
    .int()
    .min(64 * KIB)
    .default(3 * KIB * KIB),
  /** The claim hooks (`/admission/mutate-claims`, `/admission/validate-claims`), for DRA clusters. */
  claims: claimAdmissionConfigSchema.default(claimAdmissionConfigSchema.parse({})),
  /** DRA mode for pods written for the extender (`webhook.dra.convertPods`). */
  dra: draPodConfigSchema.default(draPodConfigSchema.parse({})),
  registration: registrationConfigSchema.default(registrationConfigSchema.parse({})),
  certificates: certificateConfigSchema.default(certificateConfigSchema.parse({})),
  callers: callerConfigSchema.default(callerConfigSchema.parse({})),
});

export type WebhookConfig = z.infer<typeof webhookConfigSchema>;
export type RegistrationConfig = z.infer<typeof registrationConfigSchema>;
export type CertificateConfig = z.infer<typeof certificateConfigSchema>;
export type CallerConfig = z.infer<typeof callerConfigSchema>;
export type DraPodConfig = z.infer<typeof draPodConfigSchema>;

/** Parses and freezes the webhook configuration; throws a zod error naming each bad field. */
export function loadWebhookConfig(raw: unknown): Readonly<WebhookConfig> {
  return Object.freeze(webhookConfigSchema.parse(raw ?? {}));
}
