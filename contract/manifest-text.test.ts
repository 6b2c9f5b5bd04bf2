import { describe, expect, it } from 'vitest';
import { parseManifestText } from './manifest-text.js';

describe('parseManifestText', () => {
  it('reads one YAML or JSON document', () => {
    expect(parseManifestText('kind: Pod\nmetadata: {name: a}\n', 'pod.yaml')).toEqual({
      kind: 'Pod',
      metadata: { name: 'a' },
    });
    expect(parseManifestText('{"kind":"Pod"}', 'pod.json')).toEqual({ kind: 'Pod' });
  });

  it('refuses several documents, naming the file and the count, without the parser advice', () => {
    const err = () => parseManifestText('a: 1\n---\nb: 2\n', 'trace.yaml');
    expect(err).toThrow('trace.yaml: holds 2 YAML documents (separated by ---); give one per file');
    expect(err).not.toThrow(/parseAllDocuments/);
  });

  it('names the file, the line and the column of a syntax error', () => {
    expect(() => parseManifestText('nodes:\n  - count: [1,\n', 'cluster.yaml')).toThrow(
      /^cluster\.yaml: not valid YAML: .* at line 3, column 1$/,
    );
  });

  it('reads an empty file as null, for the schema to refuse with its own message', () => {
    expect(parseManifestText('', 'empty.yaml')).toBeNull();
  });
});
