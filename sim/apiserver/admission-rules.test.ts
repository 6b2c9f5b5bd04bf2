import { describe, expect, it } from 'vitest';
import { matchesResource } from './admission.js';

describe('matchesResource (webhook rule resources, as kube-apiserver matches them)', () => {
  it.each([
    [['pods'], 'pods', undefined, true],
    [['pods'], 'pods', 'binding', false],
    [['pods/*'], 'pods', undefined, false],
    [['pods/*'], 'pods', 'binding', true],
    [['pods/status'], 'pods', 'status', true],
    [['pods/status'], 'pods', 'binding', false],
    [['*'], 'nodes', undefined, true],
    [['*'], 'pods', 'status', false],
    [['*/status'], 'nodes', 'status', true],
    [['*/status'], 'nodes', undefined, false],
    [['*/*'], 'pods', undefined, true],
    [['*/*'], 'pods', 'status', true],
    [['nodes'], 'pods', undefined, false],
    [undefined, 'pods', undefined, false],
  ] as const)('%j on %s/%s: %s', (rules, resource, sub, expected) => {
    expect(matchesResource(rules ? [...rules] : undefined, resource, sub)).toBe(expected);
  });
});
