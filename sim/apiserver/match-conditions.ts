/**
 * A webhook's `matchConditions`, evaluated as kube-apiserver (>= 1.28) does before calling it:
 * CEL over `object`, `oldObject` and `request` (the AdmissionRequest). Any condition false: the
 * webhook is skipped. All true: it is called. Otherwise an error (one failed to evaluate or is not
 * a bool), which the webhook's failurePolicy decides. Each expression is compiled once.
 */
import { parse } from '@marcbachmann/cel-js';

export type MatchCondition = { name: string; expression: string };

/** What CEL sees: the objects and the AdmissionRequest being reviewed. */
export type ConditionInput = { object: unknown; oldObject: unknown; request: unknown };

export type ConditionVerdict = { kind: 'call' } | { kind: 'skip' } | { kind: 'error'; message: string };

export type MatchConditionEvaluator = (
  conditions: readonly MatchCondition[],
  input: ConditionInput,
) => ConditionVerdict;

type Compiled = ((vars: Record<string, unknown>) => unknown) | { error: string };

export function createMatchConditionEvaluator(): MatchConditionEvaluator {
  const compiled = new Map<string, Compiled>();
  const compile = (expression: string): Compiled => {
    let c = compiled.get(expression);
    if (!c) {
      try {
        c = parse(expression) as (vars: Record<string, unknown>) => unknown;
      } catch (e) {
        c = { error: `compilation failed: ${(e as Error).message}` };
      }
      compiled.set(expression, c);
    }
    return c;
  };
  return (conditions, input) => {
    const errors: string[] = [];
    for (const condition of conditions) {
      const c = compile(condition.expression);
      let value: unknown;
      try {
        if (typeof c !== 'function') throw new Error(c.error);
        value = c(input);
      } catch (e) {
        errors.push(`expression '${condition.name}' resulted in error: ${(e as Error).message}`);
        continue;
      }
      if (value === false) return { kind: 'skip' };
      if (value !== true) errors.push(`expression '${condition.name}' must evaluate to bool`);
    }
    return errors.length ? { kind: 'error', message: errors.join('; ') } : { kind: 'call' };
  };
}
