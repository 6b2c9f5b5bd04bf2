/** `vcuda doctor`'s flags: bad ones are refused with the flag and the rule before anything is contacted. */
import { describe, expect, it } from 'vitest';
import { type DoctorFlags, doctorTargets, localDoctorCommand } from './doctor-command.js';

const base: DoctorFlags = { namespace: 'vcuda-system', heartbeatStaleSeconds: '60', timeoutSeconds: '5' };

describe('vcuda doctor flags', () => {
  it('turns flags into probe targets', () => {
    expect(
      doctorTargets({
        ...base,
        url: 'http://127.0.0.1:8080',
        extenderUrl: 'https://127.0.0.1:8444',
        extenderCert: 'c.pem',
        extenderKey: 'k.pem',
        databaseUrl: 'postgres://db/vcuda',
        heartbeatStaleSeconds: '90',
      }),
    ).toEqual({
      namespace: 'vcuda-system',
      url: 'http://127.0.0.1:8080',
      extender: { url: 'https://127.0.0.1:8444', certFile: 'c.pem', keyFile: 'k.pem' },
      databaseUrl: 'postgres://db/vcuda',
      heartbeatStaleMs: 90_000,
      timeoutMs: 5000,
    });
  });

  it.each([
    [{ url: 'localhost:8080' }, '--url: "localhost:8080" must be http:// or https://'],
    [{ url: 'not a url' }, '--url: "not a url" is not a URL (http://host:port)'],
    [
      { extenderCert: 'c.pem', extenderKey: 'k.pem' },
      '--extender-cert, --extender-key and --extender-ca need --extender-url',
    ],
    [{ extenderUrl: 'https://x:8444', extenderCert: 'c.pem' }, '--extender-cert and --extender-key go together'],
    [
      { heartbeatStaleSeconds: '0' },
      '--heartbeat-stale-seconds: "0" must be a number of seconds above 0, at most 86400',
    ],
    [{ namespace: 'Vcuda_System' }, '--namespace: "Vcuda_System" '],
    [{ timeoutSeconds: 'soon' }, '--timeout-seconds: "soon" must be a number of seconds above 0, at most 120'],
  ] as [Partial<DoctorFlags>, string][])('refuses %o', (flags, message) => {
    expect(() => doctorTargets({ ...base, ...flags })).toThrow(message);
  });

  it('prints the command line for a local cluster', () => {
    const lc = { kubeconfigPath: '/tmp/k', url: 'http://127.0.0.1:7080' };
    expect(localDoctorCommand(lc)).toBe('vcuda doctor --kubeconfig /tmp/k --url http://127.0.0.1:7080');
    expect(localDoctorCommand({ ...lc, extenderUrl: 'https://127.0.0.1:9' }, 'postgres://db/x')).toBe(
      "vcuda doctor --kubeconfig /tmp/k --url http://127.0.0.1:7080 --extender-url https://127.0.0.1:9 --database-url 'postgres://db/x'",
    );
  });

  it('never prints the ledger password in the command line it suggests', () => {
    const lc = { kubeconfigPath: '/tmp/k', url: 'http://127.0.0.1:7080' };
    for (const url of [
      'postgres://u:pw-S3cret@db/x',
      ' POSTGRES://u:pw-S3cret@db/x',
      'postgres://db/x?password=pw-S3cret',
    ]) {
      const line = localDoctorCommand(lc, url);
      expect(line).not.toContain('pw-S3cret');
      expect(line).toContain('(put the password where **** stands)');
    }
  });
});
