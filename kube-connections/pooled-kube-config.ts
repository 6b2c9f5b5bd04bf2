/**
 * A KubeConfig whose API calls share kept-alive connections. @kubernetes/client-node (1.x) gives
 * every API call a fresh `http(s).Agent`, so each call opens a new TCP connection and, against a
 * real API server, pays a TLS handshake on both sides: measured on kube-apiserver 1.32, a vcuda
 * pod cost it 33 ms of CPU against 8 for a plain pod, most of it handshakes for the bind's and the
 * agent's few calls. Here calls with the same TLS material share one keep-alive agent (a rotated
 * client certificate or CA gets a new one), as client-go's transport cache does. Proxy agents and
 * watches (each one long connection) are left as the library makes them.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';

/**
 * Idle connections close after this: under the 5 s keep-alive timeout of Node servers (the
 * simulator's API server), so a call never goes out on a connection the server is closing.
 */
export const IDLE_CONNECTION_MS = 4_000;

/** The options that make two agents' connections interchangeable. */
const CONNECTION_OPTIONS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;

type AgentWithOptions = http.Agent & { options?: Record<string, unknown> };

/**
 * A digest of the TLS options that decide whom a connection trusts and as whom it speaks: two
 * calls may share a connection only under one key, so a rotated certificate gets new ones.
 */
export function tlsMaterialKey(options: Readonly<Record<string, unknown>>): string {
  const hash = createHash('sha256');
  for (const name of CONNECTION_OPTIONS) {
    const value = options[name];
    hash.update(`\0${name}=`);
    if (value === undefined) continue;
    const parts = Array.isArray(value) ? value : [value];
    for (const part of parts) hash.update(Buffer.isBuffer(part) ? part : String(part));
  }
  return hash.digest('hex');
}

export class PooledKubeConfig extends KubeConfig {
  private readonly agents = new Map<string, http.Agent>();

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const pooled = this.pooledFor(context.getAgent());
    if (pooled) context.setAgent(pooled);
  }

  /** Closes the kept-alive connections; later calls open new ones. */
  closeIdleConnections(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  private pooledFor(made: http.Agent | https.Agent | undefined): http.Agent | undefined {
    // Exactly the library's plain agents: proxy agents (subclasses) keep their own behaviour.
    const isTls = made?.constructor === https.Agent;
    if (!made || (!isTls && made.constructor !== http.Agent)) return undefined;
    const options = (made as AgentWithOptions).options ?? {};
    const key = `${isTls ? 'https' : 'http'}|${tlsMaterialKey(options)}`;
    let agent = this.agents.get(key);
    if (!agent) {
      const picked = Object.fromEntries(
        CONNECTION_OPTIONS.filter((n) => options[n] !== undefined).map((n) => [n, options[n]]),
      );
      const keepAlive = { keepAlive: true, timeout: IDLE_CONNECTION_MS };
      agent = isTls ? new https.Agent({ ...keepAlive, ...withSecureContext(picked) }) : new http.Agent(keepAlive);
      this.agents.set(key, agent);
    }
    made.destroy(); // never used: it has no connections yet
    return agent;
  }
}

/**
 * The TLS options with their CA, certificate and key parsed once into a secure context that every
 * connection of the agent shares: given as PEM, each new connection parsed them again (a third of
 * a millisecond of the event loop per connection, and a burst of binds opens connections).
 */
function withSecureContext(options: Record<string, unknown>): https.AgentOptions {
  const { ca, cert, key, pfx, passphrase, ...rest } = options;
  const material = { ca, cert, key, pfx, passphrase } as SecureContextOptions;
  return { ...rest, secureContext: createSecureContext(material) };
}
