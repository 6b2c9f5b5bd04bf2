/**
 * The one redaction of credentials in text about to be printed or logged: a url's password
 * (`scheme://user:password@host`, any scheme, any case, wherever it sits in the text), a
 * credential parameter (`?password=`, `sslpassword=`, `token=`, also `password=...` in a libpq
 * keyword string), a bearer token, and urls spelled percent-encoded. It parses leniently, the way
 * the consumers of such text do (drivers trim whitespace and take the last `@`), and redacts too
 * much rather than too little: a text that merely looks like a credential loses its value.
 */

export const REDACTED = '****';

/** Names of parameters and keys whose value is a credential. */
const SECRET_NAME = /(password|passwd|pwd|passphrase|secret|token|apikey|api_key|key)$/i;

/**
 * `scheme://` then everything up to whitespace or a quote or angle bracket (which end a url in
 * JSON, a shell line or HTML): the whole of what a parser would take as the url.
 */
const URL_TOKEN = /([a-z][a-z0-9+.-]*:\/\/)([^\s"'<>`]*)/gi;
/** `name=value` (in a query, a libpq keyword string or a command line); a quoted value may hold spaces. */
const NAME_VALUE = /([A-Za-z0-9_%.-]+)(\s*=\s*)('[^']*'|"[^"]*"|[^\s&#;,'"]*)/g;
const BEARER = /\b(bearer)(\s+)[A-Za-z0-9\-._~+/]+=*/gi;
/** `%3A%2F%2F`: a url's `://` percent-encoded, e.g. a url inside another url's query. */
const ENCODED_SCHEME = /%3a%2f%2f/i;

function decodedName(name: string): string {
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/** `user:password@` becomes `user:****@`; the last `@` ends the user info, as drivers parse it. */
function redactUserInfo(rest: string): string {
  const at = rest.lastIndexOf('@');
  if (at < 0) return rest;
  const userInfo = rest.slice(0, at);
  const colon = userInfo.indexOf(':');
  if (colon < 0) return rest;
  return `${userInfo.slice(0, colon + 1)}${REDACTED}${rest.slice(at)}`;
}

function redactNameValues(text: string): string {
  return text.replace(NAME_VALUE, (whole, name: string, eq: string) =>
    SECRET_NAME.test(decodedName(name)) ? `${name}${eq}${REDACTED}` : whole,
  );
}

/** One whitespace-free piece of text that holds a percent-encoded url: decoded, then redacted. */
function redactEncoded(text: string): string {
  return text.replace(/\S+/g, (piece) => {
    if (!ENCODED_SCHEME.test(piece)) return piece;
    try {
      return redactCredentials(decodeURIComponent(piece));
    } catch {
      return REDACTED;
    }
  });
}

/** `text` with every credential this module recognises replaced by `****`; other text as is. */
export function redactCredentials(text: string): string {
  const urls = redactEncoded(text).replace(
    URL_TOKEN,
    (_whole, scheme: string, rest: string) => `${scheme}${redactUserInfo(rest)}`,
  );
  return redactNameValues(urls).replace(BEARER, `$1$2${REDACTED}`);
}

/**
 * A copy of a configuration fit to print or log: values of credential-named keys are `****`,
 * and every string is redacted as text.
 */
export function redactConfig(value: unknown, key = ''): unknown {
  if (typeof value === 'string') return SECRET_NAME.test(key) ? REDACTED : redactCredentials(value);
  if (Array.isArray(value)) return value.map((v) => redactConfig(v));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactConfig(v, k)]));
  }
  return value;
}

/** A field's value with credentials redacted: strings as text, an error's message and stack. */
function redactField(value: unknown): unknown {
  if (typeof value === 'string') return redactCredentials(value);
  if (value instanceof Error) {
    const message = redactCredentials(value.message);
    const stack = value.stack === undefined ? undefined : redactCredentials(value.stack);
    if (message === value.message && stack === value.stack) return value;
    // Same class and fields, so a logger serialises it as it would the original.
    return Object.assign(Object.create(Object.getPrototypeOf(value) as object), value, { message, stack });
  }
  return value;
}

/**
 * A log call's arguments with credentials redacted: each string, and each top-level field of a
 * fields object (an `err` included). For a logger's hook (pino's `hooks.logMethod`), so that no
 * log line carries a database password or a token, whoever wrote it.
 */
export function redactLogArgs(args: readonly unknown[]): unknown[] {
  return args.map((arg) => {
    if (typeof arg === 'string' || arg instanceof Error) return redactField(arg);
    if (arg && typeof arg === 'object' && !Array.isArray(arg)) {
      return Object.fromEntries(Object.entries(arg).map(([k, v]) => [k, redactField(v)]));
    }
    return arg;
  });
}

/** pino's `hooks` that apply redactLogArgs to every call. */
export const redactingLogHooks = {
  logMethod(this: unknown, args: unknown[], method: (...a: unknown[]) => void): void {
    method.apply(this, redactLogArgs(args));
  },
};
