/**
 * A TCP proxy a test controls, to cut a connection the way a network or a server failure does:
 *
 * - `forward`: bytes pass both ways;
 * - `refuse`: the server is gone: nothing listens on the port any more (new connections are
 *   refused) and open connections are reset;
 * - `blackhole`: a partition: connections are still accepted, but no byte passes either way on
 *   new or open ones; the bytes are held, and delivered when forwarding resumes, as TCP
 *   retransmission delivers them once a partition heals.
 */
import * as net from 'node:net';

export type ProxyMode = 'forward' | 'refuse' | 'blackhole';

export type TcpProxy = {
  port: number;
  mode(): ProxyMode;
  setMode(mode: ProxyMode): Promise<void>;
  /** Connections the proxy has accepted since it started. */
  accepted(): number;
  close(): Promise<void>;
};

type Link = {
  client: net.Socket;
  upstream?: net.Socket;
  /** Bytes held while no byte may pass: towards the server, towards the client. */
  toServer: Buffer[];
  toClient: Buffer[];
};

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: ProxyMode = 'forward';
  let accepted = 0;
  const links = new Set<Link>();

  const connectUpstream = (link: Link) => {
    const upstream = net.connect(target.port, target.host);
    link.upstream = upstream;
    upstream.on('data', (d: Buffer) => (mode === 'forward' ? link.client.write(d) : link.toClient.push(d)));
    upstream.on('close', () => link.client.destroy());
    upstream.on('error', () => link.client.destroy());
    flush(link);
  };

  const flush = (link: Link) => {
    if (mode !== 'forward') return;
    if (!link.upstream) return connectUpstream(link);
    for (const d of link.toServer.splice(0)) link.upstream.write(d);
    for (const d of link.toClient.splice(0)) link.client.write(d);
  };

  const onConnection = (client: net.Socket) => {
    accepted += 1;
    const link: Link = { client, toServer: [], toClient: [] };
    links.add(link);
    client.on('data', (d: Buffer) =>
      mode === 'forward' && link.upstream ? link.upstream.write(d) : link.toServer.push(d),
    );
    client.on('close', () => {
      link.upstream?.destroy();
      links.delete(link);
    });
    client.on('error', () => link.upstream?.destroy());
    if (mode === 'forward') connectUpstream(link);
  };

  let server = net.createServer(onConnection);
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port));
    });
  const stopListening = () => new Promise<void>((resolve) => server.close(() => resolve()));
  const port = await listen(0);

  return {
    port,
    mode: () => mode,
    accepted: () => accepted,
    async setMode(next) {
      if (next === mode) return;
      const previous = mode;
      mode = next;
      if (next === 'refuse') {
        await Promise.all([stopListening(), ...[...links].map((l) => l.client.resetAndDestroy())]);
        for (const l of links) l.upstream?.destroy();
        links.clear();
        return;
      }
      if (previous === 'refuse') {
        server = net.createServer(onConnection);
        await listen(port);
      }
      for (const l of links) flush(l);
    },
    async close() {
      for (const l of links) {
        l.client.destroy();
        l.upstream?.destroy();
      }
      if (mode !== 'refuse') await stopListening();
    },
  };
}

/** A proxy in front of the server a `postgres://` url names, and that url pointed at the proxy. */
export async function proxyInFrontOf(url: string): Promise<{ proxy: TcpProxy; url: string }> {
  const upstream = new URL(url);
  const proxy = await startTcpProxy({ host: upstream.hostname, port: Number(upstream.port || 5432) });
  const through = new URL(url);
  through.host = `127.0.0.1:${proxy.port}`;
  return { proxy, url: through.toString() };
}
