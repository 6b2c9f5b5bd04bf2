/**
 * Who called the webhook port: the API server proves itself with what its AdmissionConfiguration's
 * `kubeConfigFile` gives it for this webhook's host, a client certificate (checked as the
 * extender checks kube-scheduler's: verified by TLS against `clientCAFile`, naming an allowed
 * client) or a bearer token (compared with `tokenFile`'s in constant time). Reviews are answered
 * whoever calls; only an authenticated caller's reviews leave Events, log lines and dashboard rows.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { VcudaError } from '../contract/index.js';
import type { CallerCheck } from '../webhooks/admission-routes.js';
import type { CallerConfig } from '../webhooks/config.js';
import { clientCertificateCheck, type IncomingRequest } from './extender/client-certificate.js';

export type WebhookCallers = {
  check: CallerCheck;
  /** The CAs the webhook listener asks client certificates of; none: it asks for none. */
  clientCa?: string;
};

const sha256 = (text: string) => createHash('sha256').update(text).digest();

/** The caller check from the configuration; files are read here, once. */
export function webhookCallers(config: CallerConfig, readFile: (path: string) => string): WebhookCallers {
  const clientCa = config.clientCAFile ? readFile(config.clientCAFile) : undefined;
  if (clientCa !== undefined && !clientCa.includes('-----BEGIN CERTIFICATE-----'))
    throw new VcudaError('invalid', `webhook.callers.clientCAFile: ${config.clientCAFile} holds no PEM certificate`);
  const token = config.tokenFile ? readFile(config.tokenFile).trim() : undefined;
  if (token === '') throw new VcudaError('invalid', `webhook.callers.tokenFile: ${config.tokenFile} is empty`);
  const certificate = clientCa ? clientCertificateCheck(config.allowedNames) : undefined;
  const tokenHash = token ? sha256(token) : undefined;
  const check: CallerCheck = (req) => {
    if (!req) return false;
    if (certificate?.(req as IncomingRequest).ok) return true;
    if (!tokenHash) return false;
    const presented = bearerToken(req.headers.authorization);
    return presented !== undefined && timingSafeEqual(sha256(presented), tokenHash);
  };
  return { check, ...(clientCa ? { clientCa } : {}) };
}

function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}
