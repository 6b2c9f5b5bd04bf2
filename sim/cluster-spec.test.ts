import { describe, expect, it } from 'vitest';
import { resourceNames, ValidationError } from '../contract/index.js';
import { parseClusterSpec, parseMigInstance } from './cluster-spec.js';
import { runWhatIf } from './whatif/whatif-run.js';

const group = { name: 'h100-mig', cards: 2, model: 'NVIDIA H100 80GB HBM3', memoryMiB: 81559 };

function refusal(doc: unknown): string[] {
  try {
    parseClusterSpec(doc);
  } catch (err) {
    if (err instanceof ValidationError) return err.errors.map((e) => e.message);
    throw err;
  }
  return [];
}

describe('cluster description: static MIG instances', () => {
  it('reads cards in MIG mode and their instances, placed or not', () => {
    const spec = parseClusterSpec({
      nodes: [{ ...group, mig: [{ card: 1, instances: ['3g.40gb', '1g.10gb+me@6'] }] }],
    });
    expect(spec.nodes[0]?.mig).toEqual([
      { card: 1, instances: ['3g.40gb', '1g.10gb+me@6'], shared: false, dynamic: false },
    ]);
    expect(parseMigInstance('1g.10gb+me@6')).toEqual({ profile: '1g.10gb+me', start: 6 });
    expect(parseMigInstance('3g.40gb')).toEqual({ profile: '3g.40gb' });
    expect(parseClusterSpec({ nodes: [group] }).nodes[0]?.mig).toEqual([]);
  });

  it.each([
    [{ card: 2, instances: [] }, "nodes[0].mig[0].card: card 2 is not one of the group's 2 cards"],
    [{ card: 0, instances: ['3g'] }, 'nodes[0].mig[0].instances[0]'],
    [{ card: 0, instances: ['3g.40gb@8'] }, 'a MIG profile such as 3g.40gb, or 3g.40gb@4 to place it'],
  ])('refuses %j, naming the field', (mig, message) => {
    expect(refusal({ nodes: [{ ...group, mig: [mig] }] }).join('\n')).toContain(message);
  });

  it('refuses a card named twice', () => {
    expect(refusal({ nodes: [{ ...group, mig: [{ card: 0 }, { card: 0 }] }] })).toEqual([
      'nodes[0].mig[1].card: card 0 is listed twice',
    ]);
  });

  it('reads a card kept for dynamic MIG, which has no instances of its own', () => {
    const spec = parseClusterSpec({ nodes: [{ ...group, mig: [{ card: 1, dynamic: true }] }] });
    expect(spec.nodes[0]?.mig).toEqual([{ card: 1, instances: [], shared: false, dynamic: true }]);
    expect(refusal({ nodes: [{ ...group, mig: [{ card: 0, dynamic: true, instances: ['3g.40gb'] }] }] })).toEqual([
      'nodes[0].mig[0].dynamic: card 0 is kept for dynamic MIG: the node agent makes its instances, so it has no instances or shared',
    ]);
  });

  it('is refused by what-if planning, which does not model MIG yet', () => {
    const spec = parseClusterSpec({ nodes: [{ ...group, mig: [{ card: 0, instances: ['7g.80gb'] }] }] });
    expect(() =>
      runWhatIf(spec, [], { quantity: { names: resourceNames(), memoryUnitMiB: 1 }, policy: 'binpack' }),
    ).toThrow('nodes[0].mig: what-if planning does not model MIG instances yet');
  });
});
