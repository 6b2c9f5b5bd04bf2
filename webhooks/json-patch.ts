/**
 * RFC 6902 operations and RFC 6901 pointers. Annotation keys carry `/` (and may carry `~`), so
 * every key is escaped as a single reference token before it becomes part of a path.
 */

export type JsonPatchOp =
  | { op: 'add' | 'replace'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'test'; path: string; value: unknown };

/** One reference token: `~` first (to `~0`), then `/` (to `~1`); decoding is the reverse order. */
export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

export function annotationPath(key: string): string {
  return `/metadata/annotations/${escapePointerToken(key)}`;
}
