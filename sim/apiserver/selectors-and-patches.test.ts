import { describe, expect, it } from 'vitest';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch, patchTypeOf } from './patch.js';
import { type KubeObject, matchLabelSelector, parseFieldSelector, parseLabelSelector } from './selectors.js';

const obj = (labels: Record<string, string>, extra: Record<string, unknown> = {}): KubeObject => ({
  metadata: { name: 'p', namespace: 'ns', labels },
  ...extra,
});

describe('label selectors', () => {
  it.each<[string, Record<string, string>, boolean]>([
    ['app=web', { app: 'web' }, true],
    ['app==web', { app: 'db' }, false],
    ['app!=web', { tier: 'x' }, true],
    ['env in (prod, staging)', { env: 'staging' }, true],
    ['env notin (prod)', { env: 'prod' }, false],
    ['gpu', { gpu: '' }, true],
    ['!gpu', { gpu: 'yes' }, false],
    ['app=web,env in (prod)', { app: 'web', env: 'prod' }, true],
    ['', {}, true],
  ])('%s on %j is %s', (sel, labels, want) => expect(parseLabelSelector(sel)(obj(labels))).toBe(want));

  it('refuses a selector it cannot parse with a 400 Status', () => {
    expect(() => parseLabelSelector('app=(')).toThrow(
      expect.objectContaining({ status: expect.objectContaining({ code: 400 }) }),
    );
  });

  it('matches structured selectors as webhooks use them', () => {
    const sel = { matchLabels: { a: '1' }, matchExpressions: [{ key: 'b', operator: 'NotIn', values: ['x'] }] };
    expect(matchLabelSelector(sel, { a: '1' })).toBe(true);
    expect(matchLabelSelector(sel, { a: '1', b: 'x' })).toBe(false);
    expect(matchLabelSelector({}, {})).toBe(true);
    expect(matchLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Bogus' }] }, { a: '1' })).toBe(false);
  });
});

describe('field selectors', () => {
  it('reads dotted paths; an absent field is the empty string, as for unbound pods', () => {
    const bound = obj({}, { spec: { nodeName: 'n1' }, status: { phase: 'Running' } });
    expect(parseFieldSelector('spec.nodeName=n1')(bound)).toBe(true);
    expect(parseFieldSelector('spec.nodeName=,status.phase!=Failed')(obj({}))).toBe(true);
    expect(parseFieldSelector('metadata.name=p,metadata.namespace=ns')(bound)).toBe(true);
    expect(parseFieldSelector('status.phase!=Running')(bound)).toBe(false);
  });
});

describe('patches', () => {
  const pod = {
    metadata: { name: 'p', annotations: { a: '1', b: '2' } },
    spec: {
      containers: [
        { name: 'a', image: 'x:1', env: [{ name: 'E', value: '1' }] },
        { name: 'b', image: 'y:1' },
      ],
    },
  };

  it('maps content types to patch kinds and refuses others with 415', () => {
    expect(patchTypeOf('application/merge-patch+json')).toBe('merge');
    expect(patchTypeOf('application/strategic-merge-patch+json; charset=utf-8')).toBe('strategic');
    expect(patchTypeOf('application/json-patch+json')).toBe('json');
    expect(() => patchTypeOf('text/plain')).toThrow(
      expect.objectContaining({ status: expect.objectContaining({ code: 415 }) }),
    );
  });

  it('merge patch: null deletes, lists are replaced', () => {
    const out = applyMergePatch(pod, {
      metadata: { annotations: { a: null, c: '3' } },
      spec: { containers: [{ name: 'z' }] },
    }) as typeof pod;
    expect(out.metadata.annotations).toEqual({ b: '2', c: '3' });
    expect(out.spec.containers).toEqual([{ name: 'z' }]);
  });

  it('strategic merge: containers merge by name, $patch delete removes one, directives vanish', () => {
    const out = applyStrategicMergePatch(pod, {
      $setElementOrder: { containers: [{ name: 'a' }] },
      spec: {
        containers: [
          { name: 'a', image: 'x:2' },
          { name: 'b', $patch: 'delete' },
          { name: 'c', image: 'z:1' },
        ],
      },
    }) as typeof pod & Record<string, unknown>;
    expect(out.spec.containers.map((c) => `${c.name}:${c.image}`)).toEqual(['a:x:2', 'c:z:1']);
    expect(out.spec.containers[0]!.env).toEqual([{ name: 'E', value: '1' }]);
    expect(out['$setElementOrder']).toBeUndefined();
  });

  it('JSON patch: RFC 6901 escapes, and a failed test op is a 422', () => {
    const out = applyJsonPatch(pod, [
      { op: 'add', path: '/metadata/annotations/vcuda.io~1node', value: 'n1' },
    ]) as typeof pod;
    expect(out.metadata.annotations).toEqual({ a: '1', b: '2', 'vcuda.io/node': 'n1' });
    expect(() => applyJsonPatch(pod, [{ op: 'test', path: '/metadata/name', value: 'q' }])).toThrow(
      expect.objectContaining({ status: expect.objectContaining({ code: 422 }) }),
    );
    expect(pod.metadata.annotations).toEqual({ a: '1', b: '2' });
  });

  it('patches a frozen stored object into a new one; a half-applied JSON patch leaves nothing behind', () => {
    const stored = structuredClone(pod);
    for (const o of [stored, stored.metadata, stored.metadata.annotations]) Object.freeze(o);
    const out = applyJsonPatch(stored, [{ op: 'replace', path: '/metadata/annotations/a', value: 'x' }]) as typeof pod;
    expect(out.metadata.annotations).toEqual({ a: 'x', b: '2' });
    const failing = [
      { op: 'add', path: '/metadata/annotations/c', value: '3' },
      { op: 'remove', path: '/metadata/missing' },
    ];
    expect(() => applyJsonPatch(stored, failing)).toThrow(
      expect.objectContaining({
        status: expect.objectContaining({
          code: 422,
          message: expect.stringContaining('Cannot perform the operation'),
        }),
      }),
    );
    expect(stored.metadata.annotations).toEqual({ a: '1', b: '2' });
    const merged = applyMergePatch(stored, { metadata: { annotations: { b: null } } }) as typeof pod;
    expect(merged.metadata.annotations).toEqual({ a: '1' });
  });
});
