// Binding a server's port. A port in use is the operator's choice colliding with something else, so it is answered as
// a configuration error naming the setting that chose the port (one line from the CLI), not a stack trace from listen.
import { once } from 'node:events';
import type { Server } from 'node:net';
import { ConfigError, SETTINGS } from '../config/config.js';

/** Listens on host:port and waits until it does; port 0 takes one the kernel picks. */
export async function listenOn(
  server: Server,
  host: string,
  port: number,
  setting: 'port' | 'metricsPort' = 'port',
): Promise<void> {
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    const { flag, env } = SETTINGS[setting];
    throw new ConfigError([`--${flag} / ${env}: ${host}:${port} is in use (choose another port, or 0 for a free one)`]);
  }
}

/** The URL by which a process on this machine reaches a server listening on host:port (a wildcard host: loopback). */
export function localUrl(host: string, port: number): string {
  const local = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${local.includes(':') ? `[${local}]` : local}:${port}`;
}
