/**
 * `vcuda quota set|list|delete` and `vcuda team set`: administer the ledger's quotas. They talk to
 * the database directly, so the database credentials are the authority to change quotas.
 */
import type { Command } from 'commander';
import { DNS1123_LABEL_RULE, isDns1123Label, VcudaError } from '../contract/index.js';
import { closeDb, connectDb } from '../db/connect.js';
import { loadDbConfig } from '../db/db-config.js';
import { migrate } from '../db/migrate.js';
import { createQuotaAdmin, QUOTA_LIMIT_MAX } from '../db/quotas.js';
import { addDbOptions, type CliOutput } from './db-command.js';

type DbFlags = { databaseUrl?: string; dataDir?: string };
const stdout: CliOutput = { out: (text) => process.stdout.write(text) };

async function withQuotaAdmin<T>(flags: DbFlags, run: (admin: ReturnType<typeof createQuotaAdmin>) => Promise<T>) {
  const db = await connectDb(loadDbConfig(process.env, flags));
  try {
    await migrate(db);
    return await run(createQuotaAdmin(db, { clock: () => new Date() }));
  } finally {
    await closeDb(db);
  }
}

function wholeNumber(flag: string, text: string): number {
  if (!/^\d+$/.test(text)) throw new VcudaError('invalid', `${flag}: ${JSON.stringify(text)} is not a whole number`);
  const value = Number(text);
  if (value > QUOTA_LIMIT_MAX) {
    throw new VcudaError('invalid', `${flag}: ${text} is more than the ledger holds (at most ${QUOTA_LIMIT_MAX})`);
  }
  return value;
}

function namespaceName(where: string, text: string): string {
  if (!isDns1123Label(text)) throw new VcudaError('invalid', `${where}: ${JSON.stringify(text)} ${DNS1123_LABEL_RULE}`);
  return text;
}

/** `team-a/prod-eu` style member: CLUSTER/NAMESPACE. */
export function parseMember(text: string): { cluster: string; namespace: string } {
  const m = /^([^/\s]+)\/([^/\s]+)$/.exec(text);
  if (!m) throw new VcudaError('invalid', `member ${JSON.stringify(text)}: expected CLUSTER/NAMESPACE`);
  return { cluster: m[1] as string, namespace: namespaceName(`member ${JSON.stringify(text)}`, m[2] as string) };
}

export function registerQuotaCommands(program: Command, io: CliOutput = stdout): void {
  const quota = program
    .command('quota')
    .description('quotas in the ledger (per namespace, or per team across clusters)');
  addDbOptions(
    quota
      .command('set')
      .description('create or replace a quota')
      .argument('<name>', 'quota name')
      .option('--cluster <cluster>', 'with --namespace: a namespace quota in this cluster')
      .option('--namespace <namespace>', 'with --cluster: a namespace quota')
      .option('--team <team>', 'a team quota (namespaces across clusters; see `vcuda team set`)')
      .option('--gpu-model <model>', 'count only cards of this model')
      .requiredOption('--core <hundredths>', 'core limit in hundredths of a card (two whole cards = 200)')
      .requiredOption('--memory-mib <mib>', 'memory limit in MiB'),
  ).action(
    async (
      name: string,
      opts: DbFlags & {
        cluster?: string;
        namespace?: string;
        team?: string;
        gpuModel?: string;
        core: string;
        memoryMib: string;
      },
    ) => {
      const request = {
        name,
        scope: opts.team ? ('team' as const) : ('namespace' as const),
        ...(opts.cluster ? { cluster: opts.cluster } : {}),
        ...(opts.namespace ? { namespace: namespaceName('--namespace', opts.namespace) } : {}),
        ...(opts.team ? { team: opts.team } : {}),
        ...(opts.gpuModel ? { gpuModel: opts.gpuModel } : {}),
        coreLimit: wholeNumber('--core', opts.core),
        memoryLimitMiB: wholeNumber('--memory-mib', opts.memoryMib),
      };
      await withQuotaAdmin(opts, (admin) => admin.setQuota(request));
      io.out(`quota ${name} set\n`);
    },
  );
  addDbOptions(
    quota.command('list').description('list quotas and what they hold now').option('--json', 'print JSON'),
  ).action(async (opts: DbFlags & { json?: boolean }) => {
    const rows = await withQuotaAdmin(opts, (admin) => admin.listQuotas());
    if (opts.json) {
      io.out(`${JSON.stringify(rows, null, 2)}\n`);
      return;
    }
    for (const q of rows) {
      const scope = q.scope === 'team' ? `team ${q.team}` : `${q.cluster}/${q.namespace}`;
      const model = q.gpuModel ? ` model ${q.gpuModel}` : '';
      io.out(
        `${q.name}  ${scope}${model}  core ${q.coreUsed}/${q.coreLimit}  memory ${q.memoryUsedMiB}/${q.memoryLimitMiB} MiB\n`,
      );
    }
  });
  addDbOptions(quota.command('delete').description('delete a quota').argument('<name>')).action(
    async (name: string, opts: DbFlags) => {
      await withQuotaAdmin(opts, (admin) => admin.deleteQuota(name));
      io.out(`quota ${name} deleted\n`);
    },
  );
  const team = program.command('team').description('teams: namespaces across clusters that share a team quota');
  addDbOptions(
    team
      .command('set')
      .description("replace a team's namespaces")
      .argument('<team>')
      .argument('<members...>', 'CLUSTER/NAMESPACE ...'),
  ).action(async (name: string, members: string[], opts: DbFlags) => {
    const list = members.map(parseMember);
    await withQuotaAdmin(opts, (admin) => admin.setTeam(name, list));
    io.out(`team ${name}: ${list.length} namespaces\n`);
  });
}
