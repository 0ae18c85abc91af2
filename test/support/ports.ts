// A free TCP port on loopback: bind port 0, read what the kernel chose, release it. Another process can take the
// port before it is used again, so callers use it at once and treat a failed bind as a reason to retry.
import net from 'node:net';

export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
