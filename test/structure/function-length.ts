import { listProductionFiles, parseTypeScript, readSource } from './source-files.js';

/** One function of production code and how many lines it spans, first line to last, both counted. */
export type FunctionSpan = { file: string; name: string; line: number; lines: number };

type AstNode = { type: string; start: number; end: number; [key: string]: unknown };

const FUNCTION_TYPES = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

function isNode(value: unknown): value is AstNode {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}

function keyName(key: unknown): string | undefined {
  if (!isNode(key)) return undefined;
  if (key.type === 'Identifier' || key.type === 'PrivateIdentifier') return String(key['name']);
  if (key.type === 'Literal') return String(key['value']);
  return undefined;
}

/** `.action` for `program.action(…)`, `setTimeout` for `setTimeout(…)`. */
function calleeName(callee: unknown): string {
  if (!isNode(callee)) return 'call';
  if (callee.type === 'Identifier') return String(callee['name']);
  if (callee.type === 'MemberExpression') return `.${keyName(callee['property']) ?? '[…]'}`;
  return 'call';
}

/**
 * What a person calls the function at `node` whose parent is `parent`: its declared name, the
 * variable, property or method it is assigned to, or `<callee> callback` for an argument.
 */
function functionName(node: AstNode, parent: AstNode | undefined, className: string | undefined): string {
  const own = keyName(node['id']);
  if (own !== undefined) return own;
  if (parent === undefined) return '(anonymous)';
  switch (parent.type) {
    case 'VariableDeclarator':
      return keyName(parent['id']) ?? '(destructured)';
    case 'Property':
    case 'PropertyDefinition':
      return keyName(parent['key']) ?? '[computed]';
    case 'MethodDefinition':
      return `${className ?? '(class)'}.${keyName(parent['key']) ?? '[computed]'}`;
    case 'CallExpression':
    case 'NewExpression':
      return `${calleeName(parent['callee'])} callback`;
    case 'ExportDefaultDeclaration':
      return 'default export';
    default:
      return `(${parent.type})`;
  }
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1);
  return starts;
}

function lineOf(starts: readonly number[], offset: number): number {
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if ((starts[mid] as number) <= offset) low = mid;
    else high = mid - 1;
  }
  return low + 1;
}

/**
 * Every function in a source text (declarations, expressions, arrows, methods, accessors and
 * constructors), each named within the functions that enclose it: `outer > inner`.
 */
export function functionSpans(sourceText: string, file = 'file.ts'): FunctionSpan[] {
  const starts = lineStarts(sourceText);
  const spans: FunctionSpan[] = [];
  const walk = (node: AstNode, parent: AstNode | undefined, scope: string[], className: string | undefined) => {
    let innerScope = scope;
    let innerClass = className;
    if (node.type === 'ClassDeclaration' || node.type === 'ClassExpression') {
      innerClass = keyName(node['id']) ?? (parent ? functionName(node, parent, undefined) : '(class)');
    }
    if (FUNCTION_TYPES.has(node.type)) {
      innerScope = [...scope, functionName(node, parent, className)];
      const line = lineOf(starts, node.start);
      spans.push({ file, name: innerScope.join(' > '), line, lines: lineOf(starts, node.end) - line + 1 });
    }
    for (const [key, value] of Object.entries(node)) {
      if (key === 'type' || key === 'start' || key === 'end') continue;
      for (const child of Array.isArray(value) ? value : [value]) {
        if (isNode(child)) walk(child, node, innerScope, innerClass);
      }
    }
  };
  walk(parseTypeScript(sourceText, file) as unknown as AstNode, undefined, [], undefined);
  return spans;
}

/** Every function of the production code under `root`. */
export function productionFunctionSpans(root: string): FunctionSpan[] {
  return listProductionFiles(root).flatMap((file) => functionSpans(readSource(root, file), file));
}
