/**
 * Who is calling: a bearer token checked with the Kubernetes API server (TokenReview), the way
 * in-cluster services authenticate each other without a secret of their own. Writes to the
 * ledger's usage table change what teams are charged, so only the node agents' service account
 * may make them. Answers are cached briefly so a report every few seconds per node costs the API
 * server one review per token per minute.
 */
import { createHash } from 'node:crypto';
import { AuthenticationV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { MiddlewareHandler } from 'hono';
import { VcudaError } from '../../contract/index.js';
import { toVcudaError } from '../kube-client.js';

export type Caller = {
  username: string;
  groups: string[];
  /** TokenReview's `user.extra`: a token bound to a pod names it, and (Kubernetes >= 1.30) its node. */
  extra?: Readonly<Record<string, readonly string[]>>;
};

declare module 'hono' {
  /** What `requireCaller` leaves on the request for the handler: who was let in. */
  interface ContextVariableMap {
    caller?: Caller;
  }
}

/** Resolves a bearer token to its caller; undefined when the token is not valid. */
export type Authenticator = (token: string) => Promise<Caller | undefined>;

export type AuthCacheOptions = {
  /** How long an accepted token is trusted without asking again. */
  acceptTtlMs?: number;
  /** How long a refused token is refused without asking again (bounds a flood of bad tokens). */
  refuseTtlMs?: number;
  maxEntries?: number;
  now?: () => number;
};

/** The TokenReview call itself (authentication.k8s.io/v1); `audiences` empty = the API server's own. */
export function tokenReview(kc: KubeConfig, audiences: string[] = []): Authenticator {
  const api = kc.makeApiClient(AuthenticationV1Api);
  return async (token) => {
    try {
      const review = await api.createTokenReview({
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, ...(audiences.length > 0 ? { audiences } : {}) },
        },
      });
      const status = review.status;
      if (!status?.authenticated || !status.user?.username) return undefined;
      const { username, groups, extra } = status.user;
      return { username, groups: groups ?? [], ...(extra ? { extra } : {}) };
    } catch (err) {
      throw toVcudaError(err, 'token review');
    }
  };
}

/** Wraps a review with a bounded cache keyed by the token's hash (tokens are never kept). */
export function cachedAuthenticator(review: Authenticator, opts: AuthCacheOptions = {}): Authenticator {
  const acceptTtlMs = opts.acceptTtlMs ?? 60_000;
  const refuseTtlMs = opts.refuseTtlMs ?? 10_000;
  const maxEntries = opts.maxEntries ?? 1024;
  const now = opts.now ?? Date.now;
  const cache = new Map<string, { caller: Caller | undefined; until: number }>();
  return async (token) => {
    const key = createHash('sha256').update(token).digest('base64url');
    const hit = cache.get(key);
    if (hit && hit.until > now()) return hit.caller;
    const caller = await review(token);
    if (cache.size >= maxEntries) cache.delete(cache.keys().next().value as string);
    cache.set(key, { caller, until: now() + (caller ? acceptTtlMs : refuseTtlMs) });
    return caller;
  };
}

/**
 * Lets a request through only when its bearer token belongs to one of `allowed` usernames.
 * 401: no token, or one the API server does not accept; 403: a valid caller not on the list;
 * 503: the API server could not be asked (fail closed).
 */
export function requireCaller(auth: Authenticator, allowed: readonly string[], what: string): MiddlewareHandler {
  const allowedSet = new Set(allowed);
  const who = allowed.join(', ');
  return async (c, next) => {
    const token = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1];
    if (!token) {
      throw new VcudaError(
        'unauthenticated',
        `${what} needs a service account token (Authorization: Bearer ...) of ${who}`,
      );
    }
    const caller = await auth(token);
    if (!caller) throw new VcudaError('unauthenticated', `${what}: the API server did not accept the bearer token`);
    if (!allowedSet.has(caller.username)) {
      throw new VcudaError('forbidden', `${what}: ${caller.username} may not do this; allowed: ${who}`);
    }
    c.set('caller', caller);
    await next();
  };
}
