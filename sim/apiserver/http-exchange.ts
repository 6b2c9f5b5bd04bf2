/**
 * The bytes of one request and its response: decoding a body (JSON, YAML or kubectl's protobuf),
 * writing JSON or plain text, and the `Warning` headers kube-apiserver adds.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import { badRequest, unsupportedMediaType } from './api-status.js';
import { decodeProtobufBody, PROTOBUF_CONTENT_TYPE, UnsupportedProtobuf } from './protobuf-body.js';

/** The request's bytes; read with events, as an async iterator costs more than the small bodies it reads. */
function readRaw(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on('error', reject);
    // Closed before its body was complete: the client went away mid-body.
    req.on('close', () => {
      if (!req.complete) reject(new Error('the request was closed before its body was read'));
    });
  });
}

export async function readBody(req: IncomingMessage): Promise<unknown> {
  const raw = await readRaw(req);
  const ct = req.headers['content-type'] ?? '';
  if (ct.startsWith(PROTOBUF_CONTENT_TYPE)) {
    try {
      return decodeProtobufBody(raw);
    } catch (e) {
      if (e instanceof UnsupportedProtobuf) throw unsupportedMediaType(`${ct} (${e.message})`);
      throw badRequest(`the body of the request could not be decoded: ${(e as Error).message}`);
    }
  }
  const text = raw.toString('utf8');
  if (!text.trim()) return undefined;
  try {
    return ct.includes('yaml') ? parseYaml(text) : JSON.parse(text);
  } catch (e) {
    throw badRequest(`the body of the request could not be decoded: ${(e as Error).message}`);
  }
}

/**
 * A `Warning` header as kube-apiserver writes it (RFC 7234 warn-code 299, agent "-", the text
 * quoted with `\` and `"` escaped); kubectl prints each as `Warning: <text>`.
 */
export function warningHeader(text: string): string {
  const clean = text.replace(/\p{Cc}/gu, ' ').replace(/[\\"]/g, (c) => `\\${c}`);
  // Header values are bytes: UTF-8 on the wire, as Go writes them (Node sends latin1 code units).
  return `299 - "${Buffer.from(clean, 'utf8').toString('latin1')}"`;
}

export function addWarning(res: ServerResponse, text: string): void {
  const prior = res.getHeader('warning');
  const list = prior === undefined ? [] : Array.isArray(prior) ? prior : [String(prior)];
  res.setHeader('warning', [...list, warningHeader(text)]);
}

export function sendJson(res: ServerResponse, code: number, body: unknown): void {
  // Encoded once: its length and its bytes are the same buffer.
  sendJsonBytes(res, code, Buffer.from(JSON.stringify(body), 'utf8'));
}

/** A body already encoded as JSON (a stored object's shared encoding). */
export function sendJsonBytes(res: ServerResponse, code: number, payload: Buffer): void {
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': payload.length });
  res.end(payload);
}

export function sendText(res: ServerResponse, text: string): void {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end(text);
}
