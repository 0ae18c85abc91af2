// A TCP listener that accepts connections and never answers: an etcd that is stopped, hung or partitioned mid-way,
// which a refused connection (nothing listening) does not imitate.
import net from 'node:net';

export async function blackhole(): Promise<{ endpoint: string; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}
