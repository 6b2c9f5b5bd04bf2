import { describe, expect, it } from 'vitest';
import { redactConfig, redactCredentials } from './redact.js';

describe('redactCredentials', () => {
  it.each([
    ['a plain url', 'postgres://vcuda:S3cretPW@db:5432/ledger', 'postgres://vcuda:****@db:5432/ledger'],
    ['a leading space', ' postgres://vcuda:S3cretPW@db:5432/ledger', ' postgres://vcuda:****@db:5432/ledger'],
    ['leading and trailing whitespace', '\t\n postgres://u:S3cretPW@db/l \n', '\t\n postgres://u:****@db/l \n'],
    ['an upper-case scheme', 'POSTGRES://u:S3cretPW@db/l', 'POSTGRES://u:****@db/l'],
    ['a mixed-case scheme', 'PostgreSQL://u:S3cretPW@db/l', 'PostgreSQL://u:****@db/l'],
    ['a percent-encoded password', 'postgres://u:S3cr%40tPW@db/l', 'postgres://u:****@db/l'],
    ['an unencoded @ in the password', 'postgresql://u:S3cret@PW@h/db', 'postgresql://u:****@h/db'],
    ['a / and : in the password', 'postgres://u:S3c/ret:PW@h/db', 'postgres://u:****@h/db'],
    ['another scheme', 'redis://default:S3cretPW@cache:6379', 'redis://default:****@cache:6379'],
    ['https basic auth', 'https://admin:S3cretPW@example.com/x', 'https://admin:****@example.com/x'],
    ['an empty user', 'postgres://:S3cretPW@h/db', 'postgres://:****@h/db'],
    [
      'password parameters',
      'postgres://h/db?user=u&password=S3cretPW&sslpassword=S3cretPW',
      'postgres://h/db?user=u&password=****&sslpassword=****',
    ],
    ['an upper-case parameter', 'postgres://h/db?PASSWORD=S3cretPW', 'postgres://h/db?PASSWORD=****'],
    ['a percent-encoded parameter name', 'postgres://h/db?pass%77ord=S3cretPW', 'postgres://h/db?pass%77ord=****'],
    ['a libpq keyword string', "host=db user=u password='S3cret PW' dbname=l", 'host=db user=u password=**** dbname=l'],
    ['spaces around =', 'password = S3cretPW', 'password = ****'],
    [
      'a url inside a command line',
      'vcuda doctor --database-url postgres://u:S3cretPW@db/l --url http://x',
      'vcuda doctor --database-url postgres://u:****@db/l --url http://x',
    ],
    ['a quoted url', `--database-url 'postgres://u:S3cretPW@db/l'`, `--database-url 'postgres://u:****@db/l'`],
    ['a url in JSON', '{"url":"postgres://u:S3cretPW@db/l","n":"a@b"}', '{"url":"postgres://u:****@db/l","n":"a@b"}'],
    ['a bearer token', 'authorization: Bearer eyJhbGciOiJSUzI1NiJ9.S3cretPW.sig', 'authorization: Bearer ****'],
    ['a token parameter', 'GET /x?token=S3cretPW&a=1', 'GET /x?token=****&a=1'],
  ])('redacts %s', (_name, text, redacted) => {
    expect(redactCredentials(text)).toBe(redacted);
    expect(redactCredentials(text)).not.toContain('S3cret');
  });

  it('redacts a url spelled percent-encoded inside another', () => {
    const text = 'next=postgres%3A%2F%2Fu%3AS3cretPW%40db%2Fl';
    expect(redactCredentials(text)).not.toContain('S3cretPW');
  });

  it.each([
    'postgres://u@h/db',
    'postgres://h/db?sslmode=require&user=u',
    'https://vcuda-control-plane.vcuda-system.svc:443/admission',
    'pod team-a/infer on node gpu-node-1',
  ])('leaves %s as it is', (text) => {
    expect(redactCredentials(text)).toBe(text);
  });
});

describe('redactConfig', () => {
  it('redacts credential-named values and every string as text', () => {
    expect(
      redactConfig({
        a: { dbPassword: 'x', apiToken: 'y', tokenAudiences: ['aud'], secretName: 'tls' },
        urls: [' POSTGRES://u:S3cretPW@h/db'],
        n: 1,
      }),
    ).toEqual({
      a: { dbPassword: '****', apiToken: '****', tokenAudiences: ['aud'], secretName: 'tls' },
      urls: [' POSTGRES://u:****@h/db'],
      n: 1,
    });
  });
});

describe('redactingLogHooks', () => {
  it('leaves no password or token in a log line, in its message, its fields or its error', async () => {
    const { default: pino } = await import('pino');
    const { redactingLogHooks } = await import('./redact.js');
    const lines: string[] = [];
    const log = pino({ hooks: redactingLogHooks }, { write: (line: string) => lines.push(line) });
    log.info('connecting to  POSTGRES://vcuda:S3cretPW@db/ledger');
    log.warn({ url: 'postgres://u:S3cretPW@db/l', header: 'Bearer S3cretPW' }, 'ledger call failed');
    log.error({ err: new Error('connect postgres://u:S3cretPW@db/l: ECONNREFUSED') }, 'failed');
    log.info({ n: 3, nested: { kept: 'as is' } }, 'counted');
    expect(lines).toHaveLength(4);
    expect(lines.join('\n')).not.toContain('S3cretPW');
    expect(lines[2]).toContain('ECONNREFUSED');
    expect(JSON.parse(lines[3] as string)).toMatchObject({ n: 3, nested: { kept: 'as is' }, msg: 'counted' });
  });
});
