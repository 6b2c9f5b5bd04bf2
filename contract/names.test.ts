import { describe, expect, it } from 'vitest';
import { ValidationError } from './errors.js';
import { isVcudaAnnotation, resourceNames } from './names.js';

describe('resourceNames', () => {
  it('builds every name from the default domain', () => {
    const n = resourceNames();
    expect([n.core, n.memory, n.coreLimit]).toEqual([
      'nvidia.com/vcuda-core',
      'nvidia.com/vcuda-memory',
      'nvidia.com/vcuda-core-limit',
    ]);
  });

  it('serves gpu-manager users under tencent.com', () => {
    const n = resourceNames('tencent.com');
    expect(n.core).toBe('tencent.com/vcuda-core');
    expect(n.memory).toBe('tencent.com/vcuda-memory');
    expect(n.coreLimit).toBe('tencent.com/vcuda-core-limit');
  });

  it.each(['', 'nvidia', 'Nvidia.com', 'nvidia.com/', '-a.com', 'kubernetes.io', 'x.kubernetes.io', 'vcuda.io'])(
    'refuses domain %j',
    (domain) => {
      expect(() => resourceNames(domain)).toThrow(/resource domain/);
    },
  );

  it('refuses with a ValidationError naming the field the domain came from, and the rule', () => {
    const refusal = (domain: string, field?: string) => {
      try {
        resourceNames(domain, field);
      } catch (err) {
        return err;
      }
      return undefined;
    };
    const bad = refusal('Nvidia.com', '--domain');
    expect(bad).toBeInstanceOf(ValidationError);
    expect((bad as ValidationError).message).toBe(
      '--domain: resource domain "Nvidia.com" is not a DNS subdomain (e.g. nvidia.com)',
    );
    expect((bad as ValidationError).errors).toEqual([
      {
        path: '--domain',
        rule: 'dns-subdomain',
        message: '--domain: resource domain "Nvidia.com" is not a DNS subdomain (e.g. nvidia.com)',
      },
    ]);
    expect((refusal('vcuda.io') as ValidationError).errors.map((e) => [e.path, e.rule])).toEqual([
      ['resourceDomain', 'reserved'],
    ]);
  });

  it('recognizes vcuda-owned annotations only by their prefix', () => {
    expect(isVcudaAnnotation('vcuda.io/assignment')).toBe(true);
    expect(isVcudaAnnotation('nvidia.com/vcuda-core-limit')).toBe(false);
    expect(isVcudaAnnotation('x.vcuda.io/a')).toBe(false);
  });
});
