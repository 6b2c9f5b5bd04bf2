/**
 * `vcuda doctor`: checks a live installation (webhook configurations and certificates, node
 * agents' heartbeats, the published signing keys, the control plane's readiness and ledger, the
 * ledger's migrations, the scheduler extender's reachability and authentication, and on a DRA
 * cluster resource.k8s.io/v1, vcuda's DeviceClass, each node's ResourceSlice and claims stuck
 * unallocated) and prints what
 * is wrong and how to fix it. Exit status 1 when any check fails.
 */
import type { Command } from 'commander';
import { DNS1123_LABEL_RULE, isDns1123Label, REDACTED, redactCredentials, VcudaError } from '../contract/index.js';
import type { CliOutput } from './db-command.js';
import { DEFAULT_HEARTBEAT_STALE_MS, type Finding, formatFindings, hasFailure, judgeAll } from './doctor/judge.js';
import { gatherFacts, type ProbeTargets } from './doctor/probe.js';

export type DoctorFlags = {
  kubeconfig?: string;
  namespace: string;
  url?: string;
  extenderUrl?: string;
  extenderCert?: string;
  extenderKey?: string;
  extenderCa?: string;
  databaseUrl?: string;
  draDriver?: string;
  heartbeatStaleSeconds: string;
  timeoutSeconds: string;
  json?: boolean;
};

function positiveSeconds(flag: string, text: string, max: number): number {
  const n = Number(text);
  if (!(Number.isFinite(n) && n > 0 && n <= max))
    throw new VcudaError(
      'invalid',
      `${flag}: ${JSON.stringify(text)} must be a number of seconds above 0, at most ${max}`,
    );
  return n * 1000;
}

function httpUrl(flag: string, text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new VcudaError('invalid', `${flag}: ${JSON.stringify(text)} is not a URL (http://host:port)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new VcudaError('invalid', `${flag}: ${JSON.stringify(text)} must be http:// or https://`);
  return text;
}

/** The probes' targets from the flags; bad flags are refused before anything is contacted. */
export function doctorTargets(flags: DoctorFlags): ProbeTargets {
  const extenderUrl = httpUrl('--extender-url', flags.extenderUrl);
  if (!extenderUrl && (flags.extenderCert || flags.extenderKey || flags.extenderCa))
    throw new VcudaError('invalid', '--extender-cert, --extender-key and --extender-ca need --extender-url');
  if (Boolean(flags.extenderCert) !== Boolean(flags.extenderKey))
    throw new VcudaError('invalid', '--extender-cert and --extender-key go together');
  const url = httpUrl('--url', flags.url);
  if (!isDns1123Label(flags.namespace))
    throw new VcudaError('invalid', `--namespace: ${JSON.stringify(flags.namespace)} ${DNS1123_LABEL_RULE}`);
  return {
    ...(flags.kubeconfig ? { kubeconfig: flags.kubeconfig } : {}),
    namespace: flags.namespace,
    ...(url ? { url } : {}),
    ...(extenderUrl
      ? {
          extender: {
            url: extenderUrl,
            ...(flags.extenderCert ? { certFile: flags.extenderCert } : {}),
            ...(flags.extenderKey ? { keyFile: flags.extenderKey } : {}),
            ...(flags.extenderCa ? { caFile: flags.extenderCa } : {}),
          },
        }
      : {}),
    ...(flags.databaseUrl ? { databaseUrl: flags.databaseUrl } : {}),
    ...(flags.draDriver ? { draDriver: flags.draDriver } : {}),
    heartbeatStaleMs: positiveSeconds('--heartbeat-stale-seconds', flags.heartbeatStaleSeconds, 86_400),
    timeoutMs: positiveSeconds('--timeout-seconds', flags.timeoutSeconds, 120),
  };
}

/** The doctor command line for a local cluster, as `vcuda local` prints it. */
export function localDoctorCommand(
  lc: { kubeconfigPath: string; url: string; extenderUrl?: string },
  databaseUrl?: string,
) {
  const extender = lc.extenderUrl ? ` --extender-url ${lc.extenderUrl}` : '';
  // The password is never printed: the line says where it goes instead.
  const redacted = databaseUrl ? redactCredentials(databaseUrl) : undefined;
  const ledger = redacted ? ` --database-url '${redacted}'` : '';
  const hint = redacted && redacted !== databaseUrl?.trim() ? `   (put the password where ${REDACTED} stands)` : '';
  return `vcuda doctor --kubeconfig ${lc.kubeconfigPath} --url ${lc.url}${extender}${ledger}${hint}`;
}

/** Runs every check; the findings and whether any failed. */
export async function runDoctor(flags: DoctorFlags): Promise<{ findings: Finding[]; failed: boolean }> {
  const findings = judgeAll(await gatherFacts(doctorTargets(flags)));
  return { findings, failed: hasFailure(findings) };
}

export function registerDoctorCommand(program: Command, io: CliOutput = { out: (t) => process.stdout.write(t) }) {
  program
    .command('doctor')
    .description(
      'check a live installation and say what is wrong and how to fix it (start here when a pod stays Pending)',
    )
    .option('--kubeconfig <file>', 'kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster)')
    .option('--namespace <ns>', "the control plane's namespace", 'vcuda-system')
    .option(
      '--url <url>',
      "the control plane's HTTP port, e.g. http://127.0.0.1:8080 after kubectl port-forward svc/vcuda-control-plane 8080:80",
    )
    .option('--extender-url <url>', "the extender's port, e.g. https://127.0.0.1:8444 (port-forward 8444)")
    .option('--extender-cert <file>', "the scheduler's client certificate (default: Secret vcuda-extender-tls)")
    .option('--extender-key <file>', 'its private key')
    .option('--extender-ca <file>', "CA that signed the extender's serving certificate (default: the Secret's ca.crt)")
    .option(
      '--database-url <url>',
      'postgres://… of the ledger, to compare applied migrations (default: $DATABASE_URL)',
    )
    .option('--dra-driver <name>', "the DRA driver and its DeviceClass (the node agent's driverName)", 'gpu.vcuda.io')
    .option(
      '--heartbeat-stale-seconds <s>',
      "the control plane's heartbeatStaleSeconds",
      String(DEFAULT_HEARTBEAT_STALE_MS / 1000),
    )
    .option('--timeout-seconds <s>', 'deadline of each check', '5')
    .option('--json', 'print the findings as JSON')
    .action(async (flags: DoctorFlags) => {
      const databaseUrl = flags.databaseUrl ?? process.env['DATABASE_URL'];
      const { findings, failed } = await runDoctor({ ...flags, ...(databaseUrl ? { databaseUrl } : {}) });
      io.out(flags.json ? `${JSON.stringify({ failed, findings }, null, 2)}\n` : formatFindings(findings));
      if (failed) process.exitCode = 1;
    });
}
