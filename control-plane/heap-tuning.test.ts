import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { NO_PRETENURING_FLAG } from './heap-tuning.js';

const scenario = fileURLToPath(new URL('./testdata/short-lived-after-long-lived.mjs', import.meta.url));

/** MiB the old generation took in while the short-lived objects were made (see the scenario). */
function oldGenerationIntakeMiB(flag?: string): number {
  const out = execFileSync(process.execPath, [scenario, ...(flag ? [flag] : [])], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  return Number(out.split(' ')[0]);
}

describe('tuneHeapForLongLivedConnections', () => {
  it('keeps short-lived objects out of the old generation after long-lived ones came from the same place', () => {
    // Untuned, V8 learns from the kept objects that the site's objects live and puts the
    // short-lived ones straight into the old generation: about 500 MiB of garbage there. Whether
    // it learns it in a given run depends on when its young collections sample, so the control
    // gets three tries to show the effect on this V8.
    const untuned = [oldGenerationIntakeMiB()];
    while (untuned.length < 3 && Math.max(...untuned) < 100) untuned.push(oldGenerationIntakeMiB());
    expect(Math.max(...untuned)).toBeGreaterThan(100);
    // Tuned: what the kept objects' own promotion costs, about 12 MiB.
    expect(oldGenerationIntakeMiB(NO_PRETENURING_FLAG)).toBeLessThan(40);
  });
});
