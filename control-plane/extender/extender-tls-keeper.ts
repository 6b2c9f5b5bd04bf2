/**
 * Keeps a running replica's extender TLS current: in `self` mode the shared Secret (client
 * certificate re-issued before expiry) and this replica's serving certificate from its CA; in
 * `files` mode the supplied files, re-read (cert-manager renews them in place). The caller swaps
 * the listener's TLS context in `onTls`, so a rotation needs no restart.
 */
import { X509Certificate } from 'node:crypto';
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
  let current: ExtenderListenerTls | undefined;
  let ephemeral: { listener: ExtenderListenerTls; client: ExtenderClientCredentials } | undefined;

  const servingDue = (tls: ExtenderListenerTls, caPem: string) =>
    tls.ca !== caPem ||
    new Date(new X509Certificate(tls.cert).validTo).getTime() - deps.clock().getTime() <
      lifetime.rotateBeforeDays * DAY_MS;

  async function fromSecret(): Promise<ExtenderListenerTls> {
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

  async function load(): Promise<ExtenderListenerTls> {
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
    return fromSecret();
  }

  async function refresh() {
    const tls = await load();
    if (current?.cert !== tls.cert || current.key !== tls.key || current.ca !== tls.ca) {
      current = tls;
      deps.onTls(tls);
    }
    return { tls, ...(ephemeral ? { client: ephemeral.client } : {}) };
  }

  return {
    refresh,
    start(intervalMs) {
      const timer = setInterval(() => {
        refresh().catch((err: unknown) => deps.logger.warn({ err }, 'extender TLS refresh failed; retrying later'));
      }, intervalMs);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}
