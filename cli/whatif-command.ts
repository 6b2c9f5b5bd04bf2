/**
 * `vcuda whatif --cluster FILE --workload FILE`: capacity planning before buying cards. Replays a
 * workload trace through the extender's own fit and score code and prints placement rate,
 * stranded GPU capacity and quota refusals. No cluster, no processes.
 */
import type { Command } from 'commander';
import { resourceNames, ValidationError } from '../contract/index.js';

export function registerWhatifCommand(program: Command): void {
  program
    .command('whatif')
    .description('replay a workload trace against a cluster description through the placement code')
    .option('--cluster <file>', 'cluster description (YAML); default: 4 nodes x 8 cards of 80 GiB')
    // Checked in the action, so that a mistyped option is reported as such, not as a missing --workload.
    .option('--workload <file>', 'workload trace (YAML); required')
    .option('--policy <policy>', 'binpack or spread', 'binpack')
    .option('--domain <domain>', 'resource domain', 'nvidia.com')
    .option('--json', 'print the report as JSON')
    .action(async (opts: { cluster?: string; workload?: string; policy: string; domain: string; json?: boolean }) => {
      if (!opts.workload) {
        throw ValidationError.forField(
          '--workload',
          'required',
          '<file> is required (a workload trace; see sim/examples/workload.yaml)',
        );
      }
      if (opts.policy !== 'binpack' && opts.policy !== 'spread')
        throw ValidationError.forField('--policy', 'enum', `must be binpack or spread, not "${opts.policy}"`);
      // Imported here: sim/ is built for a checkout but left out of the production image, and the
      // other commands must load without it.
      const { DEFAULT_CLUSTER, loadClusterSpec } = await import('../sim/cluster-spec.js');
      const { formatWhatIf, runWhatIf } = await import('../sim/whatif/whatif-run.js');
      const { expandWorkload, loadWorkloadSpec } = await import('../sim/traces/workload-spec.js');
      const cluster = opts.cluster ? await loadClusterSpec(opts.cluster) : DEFAULT_CLUSTER;
      const names = resourceNames(opts.domain, '--domain');
      const spec = await loadWorkloadSpec(opts.workload);
      const trace = expandWorkload(spec, names);
      const report = runWhatIf(cluster, trace, {
        policy: opts.policy,
        priorityClasses: spec.priorityClasses,
        quantity: { names, memoryUnitMiB: cluster.memoryUnitMiB },
      });
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
        return;
      }
      process.stdout.write(`${formatWhatIf(report)}\n`);
    });
}
