import { describe, expect, it } from 'vitest';
import { capName, layoutCapMinor, parseMigMinors, readCapMinors } from './cap-minors.js';

/** The driver's own lines, as NVIDIA's documentation and nvidia-container-toolkit quote them. */
const DRIVER_LINES: [string, number][] = [
  ['gpu0/gi0/access', 3],
  ['gpu0/gi0/ci0/access', 4],
  ['gpu0/gi0/ci2/access', 6],
  ['gpu3/gi3/ci3/access', 439],
  ['gpu3/gi3/ci5/access', 441],
  ['gpu6/gi11/ci7/access', 920],
  ['gpu31/gi14/ci6/access', 4321],
  ['gpu31/gi14/ci7/access', 4322],
];

describe('MIG capability minors', () => {
  it.each(DRIVER_LINES)('lays out %s at minor %i, as the driver does', (name, minor) => {
    const m = /^gpu(\d+)\/gi(\d+)(?:\/ci(\d+))?\/access$/.exec(name);
    const [gpu, gi, ci] = [Number(m?.[1]), Number(m?.[2]), m?.[3] === undefined ? undefined : Number(m[3])];
    expect(layoutCapMinor(gpu, gi, ci)).toBe(minor);
    expect(capName(gpu, gi, ci)).toBe(name);
  });

  it('has no minor past the driver layout', () => {
    expect(layoutCapMinor(32, 0)).toBeUndefined();
    expect(layoutCapMinor(0, 15)).toBeUndefined();
    expect(layoutCapMinor(0, 0, 8)).toBeUndefined();
  });

  it("reads the driver's file where it exists, and the layout where it does not", () => {
    const text = `config 1\nmonitor 2\n${DRIVER_LINES.map(([n, m]) => `${n} ${m}`).join('\n')}\ngpu1/gi2/access 999\n`;
    expect(parseMigMinors(text).get('monitor')).toBe(2);
    const fromFile = readCapMinors('/proc', (path) => {
      expect(path).toBe('/proc/driver/nvidia-caps/mig-minors');
      return text;
    });
    expect(fromFile.source).toBe('driver');
    expect(fromFile.minorOf(1, 2)).toBe(999);
    expect(fromFile.minorOf(1, 3)).toBeUndefined();
    const none = readCapMinors('/nowhere', () => {
      throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
    });
    expect(none.source).toBe('layout');
    expect(none.minorOf(1, 2)).toBe(3 + (15 + 2) * 9);
  });
});
