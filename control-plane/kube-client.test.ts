import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { toVcudaError } from './kube-client.js';

const apiError = (code: number, message: string) =>
  new ApiException(code, 'HTTP error', JSON.stringify({ kind: 'Status', message }), {});

describe('toVcudaError', () => {
  it('says how to create a missing namespace (a fresh cluster)', () => {
    const e = toVcudaError(apiError(404, 'namespaces "vcuda-system" not found'), 'create secret vcuda-system/keys');
    expect(e.code).toBe('not-found');
    expect(e.message).toBe(
      'create secret vcuda-system/keys: HTTP 404 namespaces "vcuda-system" not found; create it first ' +
        '(kubectl apply -k deploy/base creates it, or kubectl create namespace vcuda-system)',
    );
  });

  it('maps conflicts and other failures to their codes, keeping the cause', () => {
    const conflict = apiError(409, 'the object has been modified');
    expect(toVcudaError(conflict, 'x')).toMatchObject({ code: 'conflict', cause: conflict });
    expect(toVcudaError(apiError(500, 'etcd down'), 'x').code).toBe('unavailable');
    expect(toVcudaError(apiError(404, 'secrets "a" not found'), 'read').message).toBe(
      'read: HTTP 404 secrets "a" not found',
    );
  });
});
