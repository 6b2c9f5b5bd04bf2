/**
 * Choosing k cards out of a node's candidates so they talk best: NVLink, then one PCIe switch,
 * host bridge, NUMA node, and across sockets last (`linkScore` in the contract). A set is as good
 * as its worst pair (a collective runs at the pace of its slowest link), then by its total.
 */
import { type CardLink, linkScore } from '../../contract/index.js';

/** Beyond this many subsets the search turns greedy; 16 cards choose 8 is 12,870. */
const MAX_EXHAUSTIVE_SETS = 20_000;

/** A pair's link quality in [0, 1]: any NVLink is 1, same board 5/6 … across sockets 0. */
export function normalizeLinkScore(link: CardLink | undefined): number {
  if (!link) return 0;
  const s = linkScore(link);
  return s >= 100 ? 1 : (s - 1) / 6;
}

export type CardSetChoice = { indexes: number[]; quality: number };

function rateSet(set: readonly number[], links: readonly (readonly CardLink[])[]): { worst: number; total: number } {
  let worst = 1;
  let total = 0;
  for (let i = 0; i < set.length; i++) {
    for (let j = i + 1; j < set.length; j++) {
      const q = normalizeLinkScore(links[set[i] as number]?.[set[j] as number]);
      if (q < worst) worst = q;
      total += q;
    }
  }
  return { worst, total };
}

function countSubsets(n: number, k: number): number {
  let r = 1;
  for (let i = 1; i <= k; i++) {
    r = (r * (n - k + i)) / i;
    if (r > MAX_EXHAUSTIVE_SETS) return r;
  }
  return r;
}

function isBetter(a: { worst: number; total: number }, b: { worst: number; total: number }): boolean {
  return a.worst > b.worst + 1e-9 || (Math.abs(a.worst - b.worst) <= 1e-9 && a.total > b.total + 1e-9);
}

/**
 * Picks k of `candidates` (indexes into the node's card list) with the best links. Earlier
 * candidates win ties, so the caller's order expresses its secondary preference.
 */
export function chooseCardSet(
  candidates: readonly number[],
  k: number,
  links: readonly (readonly CardLink[])[],
): CardSetChoice | undefined {
  if (k <= 0 || candidates.length < k) return undefined;
  if (k === 1) return { indexes: [candidates[0] as number], quality: 1 };
  if (k === 2) return choosePair(candidates, links);
  if (countSubsets(candidates.length, k) > MAX_EXHAUSTIVE_SETS) return chooseGreedily(candidates, k, links);
  let best: { set: number[]; rate: { worst: number; total: number } } | undefined;
  const current: number[] = [];
  const walk = (start: number) => {
    if (current.length === k) {
      const rate = rateSet(current, links);
      if (!best || isBetter(rate, best.rate)) best = { set: [...current], rate };
      return;
    }
    for (let i = start; i <= candidates.length - (k - current.length); i++) {
      current.push(candidates[i] as number);
      walk(i + 1);
      current.pop();
    }
  };
  walk(0);
  return best ? { indexes: best.set, quality: best.rate.worst } : undefined;
}

/** The common multi-card ask, without the general search's bookkeeping. */
function choosePair(candidates: readonly number[], links: readonly (readonly CardLink[])[]): CardSetChoice {
  let best = [candidates[0] as number, candidates[1] as number];
  let bestQ = -1;
  for (let x = 0; x < candidates.length; x++) {
    const a = candidates[x] as number;
    for (let y = x + 1; y < candidates.length; y++) {
      const b = candidates[y] as number;
      const q = normalizeLinkScore(links[a]?.[b]);
      if (q > bestQ + 1e-9) {
        bestQ = q;
        best = [a, b];
      }
    }
  }
  return { indexes: best, quality: bestQ };
}

/** Grows a set from each seed, adding the card whose worst link to the set is best. */
function chooseGreedily(
  candidates: readonly number[],
  k: number,
  links: readonly (readonly CardLink[])[],
): CardSetChoice | undefined {
  let best: { set: number[]; rate: { worst: number; total: number } } | undefined;
  for (const seed of candidates) {
    const set = [seed];
    while (set.length < k) {
      let pick = -1;
      let pickWorst = -1;
      for (const c of candidates) {
        if (set.includes(c)) continue;
        let worst = 1;
        for (const s of set) worst = Math.min(worst, normalizeLinkScore(links[s]?.[c]));
        if (worst > pickWorst) {
          pickWorst = worst;
          pick = c;
        }
      }
      set.push(pick);
    }
    const rate = rateSet(set, links);
    if (!best || isBetter(rate, best.rate)) best = { set, rate };
  }
  return best ? { indexes: best.set, quality: best.rate.worst } : undefined;
}
