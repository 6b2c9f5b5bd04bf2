import { describe, expect, it } from 'vitest';
import { KNOWN_MIG_PROFILES, MIG_PROFILE_PATTERN, migProfileOfResource, migResourceName } from './mig-resources.js';
import { resourceNames } from './names.js';

const names = resourceNames();

describe('MIG resource names', () => {
  it.each([
    ['3g.40gb', 'nvidia.com/mig-3g.40gb'],
    ['1g.10gb', 'nvidia.com/mig-1g.10gb'],
    ['1g.10gb+me', 'nvidia.com/mig-1g.10gb.me'],
    ['7g.141gb', 'nvidia.com/mig-7g.141gb'],
  ])('serves %s as %s and reads it back', (profile, resource) => {
    expect(migResourceName(names, profile)).toBe(resource);
    expect(migProfileOfResource(names, resource)).toBe(profile);
  });

  it('reads no profile from other names or another domain', () => {
    for (const key of [
      'nvidia.com/vcuda-core',
      'nvidia.com/gpu',
      'nvidia.com/mig-3g',
      'nvidia.com/mig-3g.40gb.',
      'tencent.com/mig-3g.40gb',
    ]) {
      expect(migProfileOfResource(names, key), key).toBeUndefined();
    }
    expect(migProfileOfResource(resourceNames('tencent.com'), 'tencent.com/mig-3g.40gb')).toBe('3g.40gb');
  });

  it('knows every H100 80GB and H200 141GB profile, each a valid profile and a valid Kubernetes resource name', () => {
    expect(KNOWN_MIG_PROFILES).toHaveLength(14);
    // An extended resource's name part: a qualified name (letters, digits, "-", "_", "."; 63 at most).
    const qualified = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
    for (const profile of KNOWN_MIG_PROFILES) {
      expect(profile).toMatch(MIG_PROFILE_PATTERN);
      const name = migResourceName(names, profile).split('/')[1] as string;
      expect(name.length).toBeLessThanOrEqual(63);
      expect(name).toMatch(qualified);
    }
  });
});
