/** What every `vcuda doctor` check answers, and how a probe that failed is told from a fact. */
export type Verdict = 'ok' | 'warn' | 'fail' | 'skip';
export type Finding = { check: string; verdict: Verdict; summary: string; fix?: string };

/** What could not be learned carries the error, as the probe saw it. */
export type Probed<T> = T | { error: string };
export const failed = <T>(p: Probed<T>): p is { error: string } =>
  typeof p === 'object' && p !== null && 'error' in p && typeof (p as { error: unknown }).error === 'string';
