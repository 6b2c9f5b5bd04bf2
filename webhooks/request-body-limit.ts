/**
 * A request body limit that keeps the Node adapter's direct body read. hono's bodyLimit looks at
 * the body stream of every request, which makes @hono/node-server build a full web Request (a web
 * stream over the socket) that the later `c.req.text()` or `json()` then reads through: a few
 * tenths of a millisecond per call, on every admission review and every extender call. Callers
 * that send Content-Length (the API server, kube-scheduler's Go client) are judged by it up front;
 * a chunked body is still counted while it streams.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';

export function limitRequestBody(
  maxBytes: number,
  onTooLarge: (c: Context) => Response | Promise<Response>,
): MiddlewareHandler {
  const streamingLimit = bodyLimit({ maxSize: maxBytes, onError: onTooLarge });
  return async (c, next) => {
    const declared = c.req.header('content-length');
    if (declared === undefined || c.req.header('transfer-encoding') !== undefined) return streamingLimit(c, next);
    if (Number(declared) > maxBytes) return onTooLarge(c);
    await next();
  };
}
