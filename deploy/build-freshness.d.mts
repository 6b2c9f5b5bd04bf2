// Types of build-freshness.mjs, for the TypeScript that reads them (test support).
export const STAMP: string;
export function stampFor(sourceDirs: string[], startedMs: number): { sourceDirs: string[]; startedMs: number };
export function buildIsFresh(root: string, dist?: string): boolean;
