// Types of build-freshness.mjs, for the TypeScript that reads them (test support).
export const STAMP: string;
export function sourcesFingerprint(root: string, sourceDirs: string[]): string;
export function stampFor(
  root: string,
  sourceDirs: string[],
  startedMs: number,
): { sourceDirs: string[]; startedMs: number; sources: string };
export function buildIsFresh(root: string, dist?: string): boolean;
