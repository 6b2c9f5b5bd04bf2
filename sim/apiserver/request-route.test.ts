import { describe, expect, it } from 'vitest';
import { parseRoute } from './request-route.js';

describe('request routes', () => {
  it('reads namespaced objects and subresources, decoding escaped path segments', () => {
    expect(parseRoute('/api/v1/namespaces/team-a/pods/p/status')).toMatchObject({
      kind: 'resource',
      type: { resource: 'pods' },
      namespace: 'team-a',
      name: 'p',
      subresource: 'status',
    });
    expect(parseRoute('/api/v1/namespaces/team%2Da/pods/p%2E1')).toMatchObject({ namespace: 'team-a', name: 'p.1' });
    expect(parseRoute('/api/v1/namespaces/team-a')).toMatchObject({ type: { resource: 'namespaces' }, name: 'team-a' });
    expect(parseRoute('/api/v1/pods/p/exec')).toEqual({ kind: 'unknown' });
    expect(() => parseRoute('/api/v1/namespaces/%E0%A4%A/pods')).toThrow(URIError);
  });
});
