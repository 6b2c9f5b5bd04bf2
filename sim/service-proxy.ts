/**
 * A Service in front of the control-plane replicas: a TCP proxy on one loopback port that spreads
 * connections over the live backends at random and skips one that refuses. TLS passes through
 * untouched, so the webhook's certificate is the replicas' own. Killing a replica is then what it
 * is in a cluster: its connections drop, new ones go to the others.
 */
import net from 'node:net';

export type ServiceProxy = {
  readonly port: number;
  setBackends(ports: number[]): void;
  close(): Promise<void>;
};

export async function startServiceProxy(opts: { port?: number; host?: string } = {}): Promise<ServiceProxy> {
  let backends: number[] = [];
  let next = 0;
  const sockets = new Set<net.Socket>();

  function connect(client: net.Socket, tried: number): void {
    if (backends.length === 0 || tried >= backends.length) {
      client.destroy();
      return;
    }
    // Random choice, as kube-proxy's iptables mode does; retries walk on from there.
    if (tried === 0) next = Math.floor(Math.random() * backends.length);
    const port = backends[next++ % backends.length]!;
    // kube-proxy forwards packets as they come; a userspace proxy with Nagle would hold a
    // connection's second small write (an h2 DATA frame after its HEADERS) for the peer's delayed ACK.
    const upstream = net.connect({ port, host: '127.0.0.1', noDelay: true });
    sockets.add(upstream);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.on('error', () => {
      if (!connected) connect(client, tried + 1);
      else client.destroy();
    });
    upstream.on('close', () => {
      sockets.delete(upstream);
      if (connected) client.destroy();
    });
    client.on('close', () => upstream.destroy());
    client.on('error', () => upstream.destroy());
  }

  const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    connect(client, 0);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve);
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    setBackends: (ports) => {
      backends = [...ports];
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
