/**
 * Keeps a running replica's extender TLS current: in `self` mode the shared Secret (client
 * certificate re-issued before expiry) and this replica's serving certificate from its CA; in
 * `files` mode the supplied files, re-read (cert-manager renews them in place). The caller swaps
 * the listener's TLS context in `onTls`, so a rotation needs no restart. The keeping itself is the
 * webhook listener's too (webhooks/certificate-keeper.ts); this file says where the material comes from.
 */
import { X509Certificate } from 'node:crypto';
import { createCertificateKeeper, refreshEvery } from '../../webhooks/certificate-keeper.js';
import type { CertificateSubject } from '../../webhooks/certificates.js';
import {
  type ExtenderCertificateConfig,
  type ExtenderClientCredentials,
  type ExtenderListenerTls,
  type ExtenderSecretStore,
  ensureExtenderSecret,
  issueEphemeralExtenderTls,
  issueExtenderServing,
  readExtenderTlsFiles,
} from './extender-tls.js';

const DAY_MS = 24 * 60 * 60 * 1000;

export type ExtenderTlsKeeperDeps = {
  config: ExtenderCertificateConfig;
  /** The name the client certificate carries (the first allowed client). */
  clientName: string;
  /** The names this replica's serving certificate covers. */
  serving: CertificateSubject;
  store?: ExtenderSecretStore | undefined;
  readFile: (path: string) => string;
  clock: () => Date;
  logger: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  onTls: (tls: ExtenderListenerTls) => void;
};

export type ExtenderTlsKeeper = {
  /** One pass; `client` only in ephemeral mode, where no Secret holds it for the scheduler. */
  refresh(): Promise<{ tls: ExtenderListenerTls; client?: ExtenderClientCredentials }>;
  /** Refreshes every `intervalMs` until the returned function is called; failures are logged and retried. */
  start(intervalMs: number): () => void;
};

export function createExtenderTlsKeeper(deps: ExtenderTlsKeeperDeps): ExtenderTlsKeeper {
  const { config } = deps;
  const lifetime = { validityDays: config.validityDays, rotateBeforeDays: config.rotateBeforeDays };
  let ephemeral: { listener: ExtenderListenerTls; client: ExtenderClientCredentials } | undefined;

  const servingDue = (tls: ExtenderListenerTls, caPem: string) =>
    tls.ca !== caPem ||
    new Date(new X509Certificate(tls.cert).validTo).getTime() - deps.clock().getTime() <
      lifetime.rotateBeforeDays * DAY_MS;

  async function fromSecret(current: ExtenderListenerTls | undefined): Promise<ExtenderListenerTls> {
    if (!deps.store) throw new Error('extender.certificates.mode "self" needs the Secret');
    const now = deps.clock();
    const outcome = await ensureExtenderSecret(deps.store, deps.clientName, lifetime, now);
    if (outcome.action !== 'kept') {
      deps.logger.info({ action: outcome.action, reason: outcome.reason }, 'extender client certificate');
    }
    const caPem = outcome.data['ca.crt'];
    if (current && !servingDue(current, caPem)) return current;
    const ca = { certPem: caPem, keyPem: outcome.data['ca.key'] };
    const serving = await issueExtenderServing(ca, deps.serving, lifetime, now);
    return { cert: serving.certPem, key: serving.keyPem, ca: caPem };
  }

  async function load(current: ExtenderListenerTls | undefined): Promise<ExtenderListenerTls> {
    if (config.mode === 'files') {
      if (!config.certFile || !config.keyFile || !config.clientCaFile) {
        throw new Error('extender.certificates.mode "files" needs certFile, keyFile and clientCaFile');
      }
      const files = { certFile: config.certFile, keyFile: config.keyFile, clientCaFile: config.clientCaFile };
      return readExtenderTlsFiles(files, deps.readFile);
    }
    if (config.mode === 'ephemeral') {
      ephemeral ??= await issueEphemeralExtenderTls(deps.serving, deps.clientName, lifetime, deps.clock());
      return ephemeral.listener;
    }
    return fromSecret(current);
  }

  const keeper = createCertificateKeeper<ExtenderListenerTls>({
    load,
    same: (a, b) => a.cert === b.cert && a.key === b.key && a.ca === b.ca,
    onChange: deps.onTls,
  });

  async function refresh() {
    const tls = await keeper.refresh();
    return { tls, ...(ephemeral ? { client: ephemeral.client } : {}) };
  }

  return {
    refresh,
    start: (intervalMs) =>
      refreshEvery(intervalMs, refresh, deps.logger, 'extender TLS refresh failed; retrying later'),
  };
}
