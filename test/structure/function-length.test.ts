import { describe, expect, it } from 'vitest';
import { type FunctionSpan, functionSpans, productionFunctionSpans } from './function-length.js';
import { REPOSITORY_ROOT } from './source-files.js';

const MAX_FUNCTION_LINES = 80;

/**
 * Functions still over the limit, each being split into named steps. This list only shrinks:
 * remove an entry when its function is split, and never add one; the goal is an empty list.
 */
const NOT_YET_SPLIT = new Set([]);

const keyOf = (span: FunctionSpan) => `${span.file}: ${span.name}`;

/**
 * Each function's lines, less those of the not-yet-split functions inside it: a long callback
 * on the list does not also put the short function that registers it over the limit.
 */
function linesOwnedBy(spans: readonly FunctionSpan[], allowed: ReadonlySet<string>): Map<FunctionSpan, number> {
  const owned = new Map(spans.map((span) => [span, span.lines]));
  for (const inner of spans.filter((span) => allowed.has(keyOf(span)))) {
    for (const outer of spans) {
      if (outer.file === inner.file && inner.name.startsWith(`${outer.name} > `)) {
        owned.set(outer, (owned.get(outer) as number) - inner.lines);
      }
    }
  }
  return owned;
}

function overLimit(spans: readonly FunctionSpan[], allowed: ReadonlySet<string>): string[] {
  return [...linesOwnedBy(spans, allowed)]
    .filter(([span, lines]) => lines > MAX_FUNCTION_LINES && !allowed.has(keyOf(span)))
    .map(([span, lines]) => `${span.file}:${span.line} ${span.name} (${lines} lines)`);
}

const body = (statements: number) => Array.from({ length: statements }, (_, i) => `  const v${i} = ${i};`).join('\n');

describe('the function measure', () => {
  it('counts every kind of function, first line to last, named by where it sits', () => {
    const text = [
      `export function declared(): void {\n${body(3)}\n}`,
      `const arrow = () => {\n${body(1)}\n};`,
      `const expression = function () {\n  return 1;\n};`,
      `class Keeper {\n  constructor() {}\n  get size(): number {\n    return 1;\n  }\n  refresh(): void {\n    setTimeout(() => {\n      this.size;\n    }, 1);\n  }\n}`,
      `export const deps = { load: async (x: number) => x };`,
    ].join('\n');
    const spans = functionSpans(text).map((s) => [s.name, s.lines]);
    expect(spans).toEqual([
      ['declared', 5],
      ['arrow', 3],
      ['expression', 3],
      ['Keeper.constructor', 1],
      ['Keeper.size', 3],
      ['Keeper.refresh', 5],
      ['Keeper.refresh > setTimeout callback', 3],
      ['load', 1],
    ]);
  });

  it('fails a function of 81 lines and passes one of 80, and a listed callback spares only its own lines', () => {
    const text = `function long() {\n${body(79)}\n}\nfunction fits() {\n${body(78)}\n}\nfunction register() {\n  program.action(() => {\n${body(90)}\n  });\n}`;
    const spans = functionSpans(text, 'f.ts');
    expect(overLimit(spans, new Set())).toEqual([
      'f.ts:1 long (81 lines)',
      'f.ts:162 register (94 lines)',
      'f.ts:163 register > .action callback (92 lines)',
    ]);
    expect(overLimit(spans, new Set(['f.ts: register > .action callback']))).toEqual(['f.ts:1 long (81 lines)']);
  });
});

describe('production code', () => {
  const spans = productionFunctionSpans(REPOSITORY_ROOT);

  it(`has no function over ${MAX_FUNCTION_LINES} lines outside the shrinking list`, () => {
    const offenders = overLimit(spans, NOT_YET_SPLIT);
    expect(offenders, `split these into named steps:\n${offenders.join('\n')}`).toEqual([]);
  });

  it('lists only functions that exist and are still too long, so a split one leaves the list', () => {
    const stillLong = spans.filter((s) => s.lines > MAX_FUNCTION_LINES).map(keyOf);
    expect([...NOT_YET_SPLIT].filter((key) => !stillLong.includes(key))).toEqual([]);
  });
});
