/**
 * What every HTTP(S) listener of vcuda bounds (the control plane's three ports, the node agent's
 * health and metrics port): how long a client may take to send a request's headers (a client
 * that trickles them, or sends nothing at all, is dropped within 10 s), how long the whole request,
 * how long an HTTP/2 session may sit idle, and how many connections may be open at once. Node's
 * own header timeout covers plain HTTP only once a byte has arrived, and not at all the HTTP/1.1
 * connections of an HTTP/2 server, so a deadline per connection covers the rest.
 */

export const LISTENER_LIMITS = {
  /** From a connection's opening (or its TLS handshake) to its first request's complete headers. */
  headersTimeoutMs: 5_000,
  /** A whole request, body included (3 MiB of AdmissionReview is far quicker). */
  requestTimeoutMs: 30_000,
  /** How often node checks its HTTP connections against the two above. */
  checkIntervalMs: 1_000,
  /** A TLS handshake; past it the connection is dropped. */
  handshakeTimeoutMs: 5_000,
  /** An HTTP/2 session with no frames at all; kube-apiserver and kube-scheduler reconnect at once. */
  idleSessionMs: 120_000,
  /** Open connections per listener; past it new ones are closed at once. */
  maxConnections: 512,
} as const;

/** The structural slice of a node `http`/`http2` server this needs (so contract imports no node module). */
type BoundableServer = {
  maxConnections: number;
  headersTimeout?: number;
  requestTimeout?: number;
  on(event: 'connection' | 'secureConnection', listener: (socket: DeadlineSocket) => void): unknown;
  on(
    event: 'request',
    listener: (req: { socket?: unknown }, res: { once(e: 'finish', l: () => void): unknown }) => void,
  ): unknown;
  setTimeout?: (ms: number) => unknown;
};
type DeadlineSocket = { destroy(): void; once(event: 'close', l: () => void): unknown; alpnProtocol?: string | false };

/** Options to create a plain `http` server with (the check interval is fixed at creation). */
export function httpServerOptions() {
  return {
    headersTimeout: LISTENER_LIMITS.headersTimeoutMs,
    requestTimeout: LISTENER_LIMITS.requestTimeoutMs,
    connectionsCheckingInterval: LISTENER_LIMITS.checkIntervalMs,
  };
}

/**
 * Bounds a created server: the connection cap, and a deadline per connection for its first
 * request's headers (`secureConnection` for TLS, where an HTTP/2 session's own idle timeout then
 * takes over; `connection` for plain HTTP, where node's header timeout takes over once bytes arrive).
 */
export function boundListener(server: BoundableServer, kind: 'plain' | 'tls'): void {
  server.maxConnections = LISTENER_LIMITS.maxConnections;
  server.headersTimeout = LISTENER_LIMITS.headersTimeoutMs;
  server.requestTimeout = LISTENER_LIMITS.requestTimeoutMs;
  if (kind === 'tls') server.setTimeout?.(LISTENER_LIMITS.idleSessionMs);
  const waiting = new Map<DeadlineSocket, ReturnType<typeof setTimeout>>();
  const open = new Set<DeadlineSocket>();
  const arm = (socket: DeadlineSocket) => {
    if (!open.has(socket)) return;
    const deadline = setTimeout(() => socket.destroy(), LISTENER_LIMITS.headersTimeoutMs);
    deadline.unref?.();
    waiting.set(socket, deadline);
  };
  const disarm = (socket: DeadlineSocket) => {
    clearTimeout(waiting.get(socket));
    waiting.delete(socket);
  };
  server.on(kind === 'tls' ? 'secureConnection' : 'connection', (socket) => {
    if (kind === 'tls' && socket.alpnProtocol === 'h2') return;
    open.add(socket);
    socket.once('close', () => {
      disarm(socket);
      open.delete(socket);
    });
    arm(socket);
  });
  // A request's headers are in: no deadline while it is answered (a dashboard stream lasts);
  // once answered, the connection's next request has the same deadline as its first.
  server.on('request', (req, res) => {
    const socket = req.socket as DeadlineSocket;
    if (!open.has(socket)) return;
    disarm(socket);
    res.once('finish', () => arm(socket));
  });
}
