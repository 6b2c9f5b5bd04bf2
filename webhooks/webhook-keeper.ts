/**
 * Keeps a running control plane's webhook current: the serving certificate (re-issued in the
 * shared Secret before expiry, or re-read from supplied files that cert-manager renews in place)
 * and the webhook configurations' caBundle. The caller swaps the TLS context in `onCertificate`
 * (`server.setSecureContext`), so a rotation needs no restart. The keeping itself (swap only on
 * change, the timer, retries) is certificate-keeper.ts, which the extender's listener shares.
 */
import type { ResourceNames } from '../contract/index.js';
import { createCertificateKeeper, refreshEvery } from './certificate-keeper.js';
import {
  type CertificateSecretStore,
  type CertificateSubject,
  ensureServingCertificate,
  readCertificateFiles,
  type ServingCertificate,
  serviceDnsNames,
} from './certificates.js';
import { ensureClaimWebhookRegistration } from './claim-registration.js';
import type { RegistrationConfig, WebhookConfig } from './config.js';
import {
  ensureWebhookRegistration,
  type RegistrationOutcome,
  type WebhookConfigurationClient,
} from './registration.js';

/** The names the serving certificate must cover: the URL's host outside the cluster, else the Service's. */
export function certificateSubjectFor(registration: RegistrationConfig): CertificateSubject {
  if (registration.url) {
    const host = new URL(registration.url).hostname.replace(/^\[|\]$/g, '');
    const isIp = /^[\d.]+$/.test(host) || host.includes(':');
    return isIp ? { dnsNames: [], ipAddresses: [host] } : { dnsNames: [host], ipAddresses: [] };
  }
  return {
    dnsNames: serviceDnsNames({ name: registration.serviceName, namespace: registration.serviceNamespace }),
    ipAddresses: [],
  };
}

/**
 * A registration URL on port 0 names the listener's own port, known only once it has bound (so a
 * caller never picks a port it then has to bind); before that it cannot be registered.
 */
export function registrationOnPort(registration: RegistrationConfig, port: number | undefined): RegistrationConfig {
  if (!registration.url) return registration;
  const url = new URL(registration.url);
  if (url.port !== '0') return registration;
  if (!port) throw new Error(`webhook.registration.url ${registration.url}: port 0 needs the bound listener's port`);
  url.port = String(port);
  return { ...registration, url: url.toString() };
}

export type WebhookKeeperDeps = {
  config: Pick<WebhookConfig, 'registration' | 'certificates'> &
    Partial<Pick<WebhookConfig, 'privilegedUsernames' | 'claims' | 'dra'>>;
  names: ResourceNames;
  /** Self-issued mode: the shared Secret. */
  secretStore?: CertificateSecretStore | undefined;
  /** Files mode: how to read the supplied files. */
  readFile?: ((path: string) => string) | undefined;
  /** Absent: the configurations are managed elsewhere (manifests), only the certificate is kept. */
  registrationClient?: WebhookConfigurationClient | undefined;
  clock: () => Date;
  logger: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  onCertificate: (cert: ServingCertificate) => void;
  /** The port the webhooks' listener bound, once it has: what a registration URL on port 0 means. */
  boundPort?: (() => number | undefined) | undefined;
};

export type WebhookKeeper = {
  /** The certificate alone (no registration): what a listener needs before it binds. */
  certificate(): Promise<ServingCertificate>;
  /** One pass: certificate, then registration with the bundle just read. */
  refresh(): Promise<{ certificate: ServingCertificate; registration?: RegistrationOutcome }>;
  /** Refreshes every `intervalMs` until the returned function is called; failures are logged and retried. */
  start(intervalMs: number): () => void;
};

export function createWebhookKeeper(deps: WebhookKeeperDeps): WebhookKeeper {
  const { certificates: c, registration } = deps.config;
  let lastRegistration = '';

  async function loadCertificate(): Promise<ServingCertificate> {
    if (c.mode === 'files') {
      if (!deps.readFile || !c.certFile || !c.keyFile)
        throw new Error('certificates.mode "files" needs certFile, keyFile and a reader');
      return readCertificateFiles({ certFile: c.certFile, keyFile: c.keyFile, caFile: c.caFile }, deps.readFile);
    }
    if (!deps.secretStore) throw new Error('certificates.mode "self" needs the certificate Secret');
    const outcome = await ensureServingCertificate(
      deps.secretStore,
      certificateSubjectFor(registration),
      { validityDays: c.validityDays, rotateBeforeDays: c.rotateBeforeDays },
      deps.clock(),
    );
    if (outcome.action !== 'kept') {
      deps.logger.info(
        { action: outcome.action, reason: outcome.reason, notAfter: outcome.notAfter },
        'webhook certificate',
      );
    }
    return outcome;
  }

  const keeper = createCertificateKeeper<ServingCertificate>({
    load: loadCertificate,
    same: (a, b) => a.certPem === b.certPem && a.keyPem === b.keyPem,
    onChange: deps.onCertificate,
  });

  async function refresh() {
    const certificate = await keeper.refresh();
    if (!deps.registrationClient) return { certificate };
    const config = registrationOnPort(registration, deps.boundPort?.());
    const outcome: RegistrationOutcome = await ensureWebhookRegistration(deps.registrationClient, {
      config,
      names: deps.names,
      caBundlePem: certificate.caBundlePem,
      ...(deps.config.privilegedUsernames ? { privilegedUsernames: deps.config.privilegedUsernames } : {}),
      ...(deps.config.dra?.convertPods ? { createsClaimTemplates: true } : {}),
    });
    const claims = deps.config.claims;
    if (claims?.register) {
      const input = { config, claims, caBundlePem: certificate.caBundlePem };
      outcome.claims = await ensureClaimWebhookRegistration(deps.registrationClient, input);
    }
    const changed = [outcome, outcome.claims].some(
      (o) => o && (o.mutating !== 'unchanged' || o.validating !== 'unchanged'),
    );
    const summary = JSON.stringify(outcome);
    if (summary !== lastRegistration && changed) {
      deps.logger.info(outcome, 'webhook configurations ensured');
    }
    lastRegistration = summary;
    return { certificate, registration: outcome };
  }

  return {
    certificate: () => keeper.refresh(),
    refresh,
    start: (intervalMs) => refreshEvery(intervalMs, refresh, deps.logger, 'webhook refresh failed; retrying later'),
  };
}
