/**
 * A manifest a person wrote (cluster, workload, pod): exactly one YAML or JSON document. Errors
 * name the file and the line, and never pass on the parser's advice to its own callers.
 */
import { parseAllDocuments } from 'yaml';
import { VcudaError } from './errors.js';

export function parseManifestText(text: string, source: string): unknown {
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs)) return null; // an empty stream
  const first = docs[0];
  if (docs.length > 1) {
    throw new VcudaError(
      'invalid',
      `${source}: holds ${docs.length} YAML documents (separated by ---); give one per file`,
    );
  }
  const problem = first?.errors[0];
  if (problem) {
    // The parser's message ends with " at line L, column C:" and an excerpt; keep the first line.
    const firstLine = problem.message.split('\n')[0]?.replace(/:$/, '') ?? problem.message;
    throw new VcudaError('invalid', `${source}: not valid YAML: ${firstLine}`);
  }
  return first?.toJS() ?? null;
}
