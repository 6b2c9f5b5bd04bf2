import { describe, expect, it } from 'vitest';
import { resourceNames } from '../../contract/index.js';
import { componentUpdateExpression, requestsVcudaExpression } from '../../webhooks/registration.js';
import { createMatchConditionEvaluator } from './match-conditions.js';

const evaluate = createMatchConditionEvaluator();
const names = resourceNames();
const pod = (limits: Record<string, string>, annotations: Record<string, string> = {}) => ({
  metadata: { name: 'p', annotations },
  spec: { containers: [{ name: 'c', resources: { limits } }] },
});
const request = (operation: string, username: string) => ({ operation, userInfo: { username, groups: [] } });
const cond = (expression: string, name = 'c') => ({ name, expression });

describe('matchConditions as kube-apiserver evaluates them', () => {
  it("calls the webhook for a pod naming vcuda's resources and skips one that does not", () => {
    const conditions = [cond(requestsVcudaExpression(names), 'requests-vcuda-resources')];
    const input = (object: unknown) => ({ object, oldObject: null, request: request('CREATE', 'alice') });
    expect(evaluate(conditions, input(pod({ [names.core]: '30' })))).toEqual({ kind: 'call' });
    expect(evaluate(conditions, input(pod({ cpu: '1' })))).toEqual({ kind: 'skip' });
  });

  it("skips a component's update that keeps the user knobs, and calls for one that changes a knob", () => {
    const component = 'system:serviceaccount:vcuda-system:vcuda-node-agent';
    const conditions = [cond(componentUpdateExpression(names, [component]))];
    const old = pod({ [names.core]: '30' }, { [`${names.domain}/vcuda-core-limit`]: '30' });
    const annotated = pod({ [names.core]: '30' }, { ...old.metadata.annotations, 'vcuda.io/allocated-at': 'now' });
    const knob = pod({ [names.core]: '30' }, { [`${names.domain}/vcuda-core-limit`]: '90' });
    const update = (object: unknown, user: string) => ({ object, oldObject: old, request: request('UPDATE', user) });
    expect(evaluate(conditions, update(annotated, component))).toEqual({ kind: 'skip' });
    expect(evaluate(conditions, update(knob, component))).toEqual({ kind: 'call' });
    expect(evaluate(conditions, update(annotated, 'alice'))).toEqual({ kind: 'call' });
  });

  it('lets any false condition win over an error, and reports errors and non-bools otherwise', () => {
    const input = { object: pod({}), oldObject: null, request: request('CREATE', 'alice') };
    const broken = cond('object.nope.deeper == 1', 'broken');
    expect(evaluate([broken, cond('false')], input)).toEqual({ kind: 'skip' });
    const failed = evaluate([broken, cond('true')], input);
    expect(failed).toMatchObject({
      kind: 'error',
      message: expect.stringContaining("expression 'broken' resulted in error"),
    });
    expect(evaluate([cond('"yes"', 'text')], input)).toEqual({
      kind: 'error',
      message: "expression 'text' must evaluate to bool",
    });
    expect(evaluate([cond('(((', 'unparsable')], input)).toMatchObject({
      kind: 'error',
      message: expect.stringContaining('compilation failed'),
    });
  });
});
