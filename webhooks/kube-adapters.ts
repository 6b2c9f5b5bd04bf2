/**
 * The only file in webhooks/ that talks to the API server: @kubernetes/client-node behind the
 * narrow interfaces the rest declares (certificate Secret, webhook configurations).
 * It translates only: base64 for Secret data, HTTP 404 to "absent", HTTP 409 to a conflict.
 */
import {
  AdmissionregistrationV1Api,
  ApiException,
  CoreV1Api,
  type KubeConfig,
  type V1MutatingWebhookConfiguration,
  type V1ValidatingWebhookConfiguration,
  VersionApi,
} from '@kubernetes/client-node';
import { VcudaError } from '../contract/index.js';
import { type CertificateSecretStore, type PemSecretStore, SecretConflictError } from './certificates.js';
import type { StoredConfiguration, WebhookConfiguration, WebhookConfigurationClient } from './registration.js';

function statusOf(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

function describeFailure(what: string, err: unknown): VcudaError {
  const status = statusOf(err);
  const detail = err instanceof ApiException ? `HTTP ${err.code}: ${String(err.body).slice(0, 300)}` : String(err);
  return new VcudaError(status === 403 ? 'forbidden' : 'unavailable', `${what}: ${detail}`, { cause: err });
}

const SECRET_KEYS = ['tls.crt', 'tls.key', 'ca.crt'] as const;

/** The shared certificate Secret (type kubernetes.io/tls plus ca.crt). */
export function kubeCertificateSecretStore(kc: KubeConfig, namespace: string, name: string): CertificateSecretStore {
  return kubePemSecretStore(kc, namespace, name, SECRET_KEYS);
}

/** A kubernetes.io/tls Secret with `keys` (tls.crt and tls.key among them); values are PEM text. */
export function kubePemSecretStore<K extends string>(
  kc: KubeConfig,
  namespace: string,
  name: string,
  keys: readonly K[],
): PemSecretStore<K> {
  const core = kc.makeApiClient(CoreV1Api);
  const description = `Secret ${namespace}/${name}`;
  const body = (data: Record<K, string>, resourceVersion?: string) => ({
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'kubernetes.io/tls',
    metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'vcuda' }, resourceVersion },
    data: Object.fromEntries(keys.map((k) => [k, Buffer.from(data[k]).toString('base64')])),
  });
  return {
    description,
    async read() {
      try {
        const secret = await core.readNamespacedSecret({ name, namespace });
        const data: Partial<Record<K, string>> = {};
        for (const k of keys) {
          const v = secret.data?.[k];
          if (v !== undefined) data[k] = Buffer.from(v, 'base64').toString('utf8');
        }
        return { data, resourceVersion: secret.metadata?.resourceVersion ?? '' };
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw describeFailure(`reading ${description}`, err);
      }
    },
    async create(data) {
      try {
        await core.createNamespacedSecret({ namespace, body: body(data) });
      } catch (err) {
        if (statusOf(err) === 409) throw new SecretConflictError(description);
        throw describeFailure(`creating ${description}`, err);
      }
    },
    async replace(data, resourceVersion) {
      try {
        await core.replaceNamespacedSecret({ name, namespace, body: body(data, resourceVersion) });
      } catch (err) {
        if (statusOf(err) === 409) throw new SecretConflictError(description);
        throw describeFailure(`replacing ${description}`, err);
      }
    },
  };
}

type AnyConfiguration = V1MutatingWebhookConfiguration | V1ValidatingWebhookConfiguration;

/** Mutating/ValidatingWebhookConfiguration access and the server's version. */
export function kubeWebhookConfigurationClient(kc: KubeConfig): WebhookConfigurationClient {
  const api = kc.makeApiClient(AdmissionregistrationV1Api);
  const version = kc.makeApiClient(VersionApi);
  const isMutating = (kind: WebhookConfiguration['kind']) => kind === 'MutatingWebhookConfiguration';
  const write = async (obj: WebhookConfiguration, verb: 'create' | 'replace'): Promise<StoredConfiguration> => {
    const name = obj.metadata.name;
    // The shapes are the API's own; client-node's classes only add optional fields.
    const body = obj as unknown as AnyConfiguration;
    try {
      if (isMutating(obj.kind)) {
        return verb === 'create'
          ? await api.createMutatingWebhookConfiguration({ body })
          : await api.replaceMutatingWebhookConfiguration({ name, body });
      }
      return verb === 'create'
        ? await api.createValidatingWebhookConfiguration({ body })
        : await api.replaceValidatingWebhookConfiguration({ name, body });
    } catch (err) {
      if (statusOf(err) === 409) throw new VcudaError('conflict', `${obj.kind} ${name} was changed concurrently`);
      throw describeFailure(`${verb} ${obj.kind} ${name}`, err);
    }
  };
  return {
    async serverVersion() {
      try {
        return await version.getCode();
      } catch (err) {
        throw describeFailure('reading the API server version', err);
      }
    },
    async read(kind, name) {
      try {
        return isMutating(kind)
          ? await api.readMutatingWebhookConfiguration({ name })
          : await api.readValidatingWebhookConfiguration({ name });
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw describeFailure(`reading ${kind} ${name}`, err);
      }
    },
    create: (obj) => write(obj, 'create'),
    replace: (obj) => write(obj, 'replace'),
  };
}
