/**
 * The HTTPS listeners that keep their own certificates: the admission webhooks (with the keeper
 * that issues, rotates and registers them) and the scheduler extender (with its TLS keeper).
 */
import { readFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';
import { Hono } from 'hono';
import type { ResourceNames } from '../../contract/index.js';
import type { AdmissionListener } from '../../webhooks/admission-handler.js';
import { type ServingCertificate, serviceDnsNames } from '../../webhooks/certificates.js';
import type { WebhookConfig } from '../../webhooks/config.js';
import {
  kubeCertificateSecretStore,
  kubePemSecretStore,
  kubeWebhookConfigurationClient,
} from '../../webhooks/kube-adapters.js';
import { createWebhookKeeper, type WebhookKeeper } from '../../webhooks/webhook-keeper.js';
import { createApp } from '../app.js';
import { extenderNotServedHere } from '../extender/client-certificate.js';
import { EXTENDER_SECRET_KEYS, type ExtenderClientCredentials } from '../extender/extender-tls.js';
import { createExtenderTlsKeeper } from '../extender/extender-tls-keeper.js';
import type { WebhookCallers } from '../webhook-callers.js';
import type { Closer, StartContext } from './context.js';
import { type Listening, listen } from './http-listener.js';

/** Certificate and webhook-configuration re-check; rotation happens days before expiry. */
const WEBHOOK_REFRESH_MS = 10 * 60_000;

/**
 * The webhook port, when served: the admission reviews (the listener in front answers them
 * first); the extender's paths answer 401 (with `callers.clientCa` this listener verifies the API
 * server's client certificates, which must never pass for kube-scheduler's). Its keeper's first
 * pass issues, keeps or reads the certificate and writes the configurations with its CA; then it
 * rotates before expiry (or picks up renewed files) and mends drifted configurations, without a
 * restart.
 */
export async function serveWebhooks(
  ctx: StartContext,
  deps: {
    webhook: WebhookConfig;
    cluster: { names: ResourceNames; kc: KubeConfig | undefined };
    admission: { routes: Hono; listener: AdmissionListener; callers: WebhookCallers };
    /** The port to listen on, 0 for any free one; config's `httpsPort` otherwise (where 0 turns the webhooks off). */
    port?: number | undefined;
  },
): Promise<{ url?: string; close: Closer }> {
  const { config } = ctx;
  let https: Listening | undefined;
  const { clientCa } = deps.admission.callers;
  const tlsOf = (cert: ServingCertificate) => ({
    key: cert.keyPem,
    cert: cert.certPem,
    ...(clientCa ? { ca: clientCa } : {}),
  });
  const { names, kc } = deps.cluster;
  const boundPort = () => (https ? Number(new URL(https.url).port) : undefined);
  const keeper = createKeeper(ctx, { webhook: deps.webhook, names, kc, boundPort }, (cert) =>
    https?.setCertificate(tlsOf(cert)),
  );
  if (!keeper) return { close: () => undefined };
  // Bound first, registered after: the configurations name a listener that already answers
  // (and a URL on port 0 gets the port it bound).
  const certificate = await keeper.certificate();
  https = await listen(
    createApp({ admission: deps.admission.routes, scheduler: extenderNotServedHere() }),
    config.host,
    deps.port ?? config.httpsPort,
    tlsOf(certificate),
    deps.admission.listener,
  );
  const served = https;
  try {
    await keeper.refresh();
  } catch (err) {
    await served.close();
    throw err;
  }
  const stopKeeper = keeper.start(WEBHOOK_REFRESH_MS);
  return {
    url: served.url,
    close: async () => {
      stopKeeper();
      await served.close();
    },
  };
}

/** The webhook's certificate keeper, or none when the webhooks are not served (no cluster, no files). */
function createKeeper(
  { config, clock, log }: StartContext,
  deps: {
    webhook: WebhookConfig;
    names: ResourceNames;
    kc: KubeConfig | undefined;
    boundPort: () => number | undefined;
  },
  onCertificate: (cert: ServingCertificate) => void,
): WebhookKeeper | undefined {
  if (config.httpsPort === 0) return undefined;
  const { webhook, kc } = deps;
  const c = webhook.certificates;
  const fromFiles = c.mode === 'files' && Boolean(c.certFile && c.keyFile);
  if (!fromFiles && !kc) {
    log.info('no cluster and no certificate files: the admission webhooks are not served');
    return undefined;
  }
  return createWebhookKeeper({
    config: webhook,
    names: deps.names,
    secretStore: !fromFiles && kc ? kubeCertificateSecretStore(kc, c.secretNamespace, c.secretName) : undefined,
    readFile: (path) => readFileSync(path, 'utf8'),
    registrationClient: kc && config.webhookRegistration === 'auto' ? kubeWebhookConfigurationClient(kc) : undefined,
    clock,
    logger: { info: (o, m) => log.info(o, m), warn: (o, m) => log.warn(o, m) },
    onCertificate,
    boundPort: deps.boundPort,
  });
}

/**
 * The scheduler extender's own HTTPS listener, which demands a client certificate from the CAs
 * the keeper trusts, and keeps its TLS current. Serves only `/scheduler/...`.
 */
export async function serveExtender(
  { config, clock, log }: StartContext,
  deps: { webhook: WebhookConfig; scheduler: Hono; kc: KubeConfig | undefined },
): Promise<{ url: string; client?: ExtenderClientCredentials; close: Closer }> {
  const certificates = config.extender.certificates;
  const { webhook, kc } = deps;
  const service = { name: webhook.registration.serviceName, namespace: webhook.registration.serviceNamespace };
  let listening: Listening | undefined;
  const keeper = createExtenderTlsKeeper({
    config: certificates,
    clientName: config.extender.allowedClients[0] as string,
    // Without a cluster the callers are on this machine.
    serving:
      certificates.mode === 'ephemeral'
        ? { dnsNames: [...serviceDnsNames(service), 'localhost'], ipAddresses: ['127.0.0.1'] }
        : { dnsNames: serviceDnsNames(service), ipAddresses: [] },
    store:
      certificates.mode === 'self' && kc
        ? kubePemSecretStore(kc, config.namespace, certificates.secretName, EXTENDER_SECRET_KEYS)
        : undefined,
    readFile: (path) => readFileSync(path, 'utf8'),
    clock,
    logger: { info: (o, m) => log.info(o, m), warn: (o, m) => log.warn(o, m) },
    onTls: (tls) => listening?.setCertificate(tls),
  });
  const { tls, client } = await keeper.refresh();
  listening = await listen(new Hono().route('/scheduler', deps.scheduler), config.host, config.extender.port, tls);
  const stop = keeper.start(WEBHOOK_REFRESH_MS);
  const served = listening;
  return {
    url: served.url,
    ...(client ? { client } : {}),
    close: async () => {
      stop();
      await served.close();
    },
  };
}
