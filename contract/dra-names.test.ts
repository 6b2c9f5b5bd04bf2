import { describe, expect, it } from 'vitest';
import { draDeviceName, draMigDeviceName, isDraMigDeviceName } from './dra.js';

describe('DRA device names', () => {
  it('names a MIG partition by card, profile and first memory slice, as a DNS label apart from cards', () => {
    expect(draMigDeviceName(0, '3g.40gb', 4)).toBe('gpu-0-mig-3g-40gb-4');
    expect(draMigDeviceName(7, '1g.18gb+me', 6)).toBe('gpu-7-mig-1g-18gb-me-6');
    for (const name of [draMigDeviceName(12, '7g.141gb', 0), draMigDeviceName(1, '1g.10gb+me', 3)]) {
      expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      expect(isDraMigDeviceName(name)).toBe(true);
    }
    expect(isDraMigDeviceName(draDeviceName(3))).toBe(false);
    expect(isDraMigDeviceName('gpu-0-mig-')).toBe(false);
  });
});
