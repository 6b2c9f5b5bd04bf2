/**
 * The admission hooks as a plain node:http(s) request listener, for the hot path: the API server
 * calls `/admission/mutate` for every pod it creates, and the hono adapter builds a web Request,
 * Headers and Response around each review. This listener reads the body into one buffer sized
 * from Content-Length and answers with one write of a known length, through the same answerer as the
 * hono routes (admission-routes.ts), so both give byte-identical answers.
 *
 * Mount it in front of the control plane's other routes:
 *   http2.createSecureServer({ ...tls, allowHTTP1: true }, (req, res) => admission(req, res) || honoListener(req, res))
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import {
  type AdmissionReply,
  type AdmissionRoutesDeps,
  createAdmissionAnswerer,
  HOOKS,
  type Hook,
} from './admission-routes.js';

type HookRequest = IncomingMessage | Http2ServerRequest;
type HookResponse = ServerResponse | Http2ServerResponse;

/**
 * Handles the request and returns true when it is for a hook; false leaves it to the caller. Over
 * HTTP/1.1 or HTTP/2 (the API server offers h2 and multiplexes its reviews when the listener does).
 */
export type AdmissionListener = (req: HookRequest, res: HookResponse) => boolean;

const JSON_HEADERS = { 'content-type': 'application/json' } as const;

/** `/admission/mutate?timeout=5s` -> `mutate`, `/admission/validate-claims` -> `validate-claims`; anything else -> undefined. */
export function readHookPath(url: string | undefined, prefix: string): Hook | undefined {
  if (url === undefined || !url.startsWith(prefix)) return undefined;
  const end = url.indexOf('?', prefix.length);
  const rest = end === -1 ? url.slice(prefix.length) : url.slice(prefix.length, end);
  return (HOOKS as readonly string[]).includes(rest) ? (rest as Hook) : undefined;
}

function send(res: HookResponse, status: number, text: string): void {
  // A string body with its exact length: node prepends the header block to it and writes both
  // as one TLS record (a Buffer body would go out as a writev of two chunks).
  res.writeHead(status, { ...JSON_HEADERS, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendInvalid(res: HookResponse, status: 400 | 405, message: string): void {
  if (status === 405) res.setHeader('allow', 'POST');
  send(res, status, JSON.stringify({ error: { code: 'invalid', message } }));
}

/**
 * `prefix` is where the hooks live (`/admission/` in the control plane). Bodies over
 * `maxBodyBytes` get 400 before they are read when Content-Length says so, and as soon as they
 * pass the limit otherwise (chunked).
 */
export function createAdmissionListener(deps: AdmissionRoutesDeps, prefix = '/admission/'): AdmissionListener {
  const answer = createAdmissionAnswerer(deps);
  const limit = deps.maxBodyBytes;
  const tooLarge = `request body exceeds ${limit} bytes`;

  function reply(hook: Hook, req: HookRequest, res: HookResponse, text: string): void {
    const authenticated = deps.authenticateCaller?.(req) ?? false;
    // The answerer never rejects (malformed input is a 400 reply); a bug still must not hang the API server.
    answer(hook, text, { authenticated }).then(
      (r: AdmissionReply) => send(res, r.status, r.body),
      (err: unknown) => {
        deps.logger.warn({ err, hook }, 'admission answer failed');
        if (!res.headersSent)
          send(res, 500, JSON.stringify({ error: { code: 'internal', message: 'admission failed' } }));
      },
    );
  }

  return (req, res) => {
    const hook = readHookPath(req.url, prefix);
    if (hook === undefined) return false;
    if (req.method !== 'POST') {
      sendInvalid(res, 405, `${req.method} is not allowed; the API server POSTs an AdmissionReview`);
      req.resume();
      return true;
    }
    const declared = req.headers['content-length'];
    const chunked = req.headers['transfer-encoding'] !== undefined;
    const declaredBytes = declared === undefined || chunked ? undefined : Number(declared);
    if (declaredBytes !== undefined && !(declaredBytes <= limit)) {
      sendInvalid(res, 400, tooLarge);
      req.resume();
      return true;
    }
    // One buffer sized from Content-Length (the API server always sends it); chunks otherwise.
    const sized = declaredBytes !== undefined ? Buffer.allocUnsafe(declaredBytes) : undefined;
    const chunks: Buffer[] = [];
    let received = 0;
    let refused = false;
    req.on('data', (chunk: Buffer) => {
      if (refused) return;
      if (received + chunk.length > (declaredBytes ?? limit)) {
        refused = true;
        sendInvalid(res, 400, declaredBytes === undefined ? tooLarge : 'request body is longer than Content-Length');
        return;
      }
      if (sized) chunk.copy(sized, received);
      else chunks.push(chunk);
      received += chunk.length;
    });
    req.on('end', () => {
      if (refused) return;
      const body = sized ? sized.subarray(0, received) : Buffer.concat(chunks, received);
      reply(hook, req, res, body.toString('utf8'));
    });
    req.on('error', () => {
      refused = true;
      res.destroy();
    });
    return true;
  };
}
