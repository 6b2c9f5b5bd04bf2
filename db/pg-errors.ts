/** Recognising PostgreSQL errors through either driver, and retrying the transient ones. */

/** SQLSTATE of a driver error; drizzle may wrap the driver's error in `cause`. */
export function pgErrorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

export const UNIQUE_VIOLATION = '23505';
/** Serialization failure and deadlock: the transaction did nothing and can simply run again. */
const TRANSIENT = new Set(['40001', '40P01']);

export async function retryTransient<T>(run: () => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (attempt >= attempts || !TRANSIENT.has(pgErrorCode(err) ?? '')) throw err;
      // A short, growing pause lets the transaction that won finish first.
      await new Promise((r) => setTimeout(r, attempt * 3));
    }
  }
}

/**
 * Socket errors and the postgres.js codes for a connection that went away: the server is gone,
 * restarting or partitioned, not the statement at fault.
 */
const CONNECTION_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);
/** SQLSTATEs of a server that cannot serve now: connection exceptions (08), shutdown, too many clients. */
const SERVER_UNAVAILABLE = /^(08...|57P0[1-3]|53300)$/;

/** Whether `err` says the ledger could not be reached (retry later) rather than what was asked is wrong. */
export function isLedgerUnreachable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (CONNECTION_ERRORS.has(code) || SERVER_UNAVAILABLE.test(code))) return true;
  }
  return false;
}
