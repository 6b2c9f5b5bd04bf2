import fc from 'fast-check';
import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { isVcudaAnnotation, readPodGpuRequest, resourceNames } from '../contract/index.js';
import { pod } from '../test/builders/pod.js';
import { type MutationPolicy, mutatePodCreate, VCUDA_POD_LABEL } from './mutate.js';

const names = resourceNames();
const policy: MutationPolicy = { quantity: { names, memoryUnitMiB: 1 }, privilegedUsernames: new Set() };

// Keys as users write them, including the characters JSON Pointer must escape.
const key = fc.oneof(
  fc.stringMatching(/^[a-z~/.]{1,12}$/),
  fc.stringMatching(/^[a-z~/.]{1,12}$/).map((s) => `vcuda.io/${s}`),
  fc.constantFrom('vcuda.io/assignment', 'vcuda.io/assigned-node', 'a~b/c', '~1', 'example.com/x'),
);

describe('mutatePodCreate properties', () => {
  it('the applied patch removes exactly the vcuda.io annotations, adds the hard limit, and touches nothing else', () => {
    fc.assert(
      fc.property(
        fc.dictionary(key, fc.string({ maxLength: 8 }), { maxKeys: 8 }),
        fc.integer({ min: 1, max: 99 }),
        fc.integer({ min: 1, max: 80_000 }),
        (annotations, core, memory) => {
          const p = pod('p').share(core, memory).obj();
          delete (annotations as Record<string, string>)[names.coreLimit];
          (p.metadata as { annotations: Record<string, string> }).annotations = annotations;
          const result = mutatePodCreate(p, policy);
          if (result.kind !== 'admitted') return false;
          const out = fastJsonPatch.applyPatch(
            structuredClone(p),
            result.patch as fastJsonPatch.Operation[],
            true,
            false,
          ).newDocument as typeof p & { metadata: { labels: Record<string, string> } };
          const kept = Object.fromEntries(Object.entries(annotations).filter(([k]) => !isVcudaAnnotation(k)));
          expect(out.metadata?.annotations).toEqual({ ...kept, [names.coreLimit]: String(core) });
          expect(out.metadata.labels).toEqual({ [VCUDA_POD_LABEL]: 'true' });
          expect(out.spec).toEqual(p.spec);
          const req = readPodGpuRequest(out, policy.quantity);
          expect(req.containers.every((c) => c.mode === 'hard' && c.coreLimit === core)).toBe(true);
          return true;
        },
      ),
      { numRuns: 300 },
    );
  });

  it('whatever the containers, an admitted pod stays admitted and hard after its own patch', () => {
    const container = fc.oneof(
      fc.record({
        kind: fc.constant('share' as const),
        core: fc.integer({ min: 1, max: 99 }),
        mem: fc.integer({ min: 1, max: 1e6 }),
      }),
      fc.record({ kind: fc.constant('whole' as const), cards: fc.integer({ min: 1, max: 8 }) }),
    );
    fc.assert(
      fc.property(fc.array(container, { minLength: 1, maxLength: 5 }), (containers) => {
        const b = pod('p');
        for (const [i, c] of containers.entries()) {
          if (c.kind === 'share') b.share(c.core, c.mem, `c${i}`);
          else b.whole(c.cards, `c${i}`);
        }
        const p = b.obj();
        const first = mutatePodCreate(p, policy);
        if (first.kind !== 'admitted') return false;
        const out = fastJsonPatch.applyPatch(
          structuredClone(p),
          first.patch as fastJsonPatch.Operation[],
          true,
          false,
        ).newDocument;
        const before = readPodGpuRequest(p, policy.quantity);
        const after = readPodGpuRequest(out, policy.quantity);
        expect(after).toEqual(before);
        expect(after.containers.every((c) => c.mode === 'hard')).toBe(true);
        // Idempotent: a second pass changes nothing.
        const second = mutatePodCreate(out, policy);
        expect(second.kind === 'admitted' && second.patch).toEqual([]);
        return true;
      }),
      { numRuns: 300 },
    );
  });
});
