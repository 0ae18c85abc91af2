// The V8 heap a child process keeps after a full garbage collection, read through its inspector (the child runs with
// --inspect on a loopback port). RSS alone cannot tell memory the process still holds from heap V8 grew under load
// and has not returned to the system; the heap used after a collection is what is retained.
import { request, WebSocket, type MessageEvent } from 'undici';

export interface HeapAfterGc {
  usedMiB: number;
  totalMiB: number;
}

interface InspectorTarget {
  webSocketDebuggerUrl: string;
}

/** Collects garbage in the process whose inspector listens on `port`, then reads its heap usage. */
export async function heapAfterGc(port: number): Promise<HeapAfterGc> {
  const targets = (await (await request(`http://127.0.0.1:${port}/json/list`)).body.json()) as InspectorTarget[];
  const socket = new WebSocket(targets[0].webSocketDebuggerUrl);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve(), { once: true });
    socket.addEventListener('error', () => reject(new Error(`inspector on port ${port} refused the connection`)), {
      once: true,
    });
  });
  let nextId = 0;
  const send = (method: string) =>
    new Promise<Record<string, number>>((resolve, reject) => {
      const id = ++nextId;
      const onMessage = (event: MessageEvent) => {
        const message = JSON.parse(String(event.data)) as {
          id?: number;
          result?: Record<string, number>;
          error?: unknown;
        };
        if (message.id !== id) return;
        socket.removeEventListener('message', onMessage);
        if (message.error) reject(new Error(`${method}: ${JSON.stringify(message.error)}`));
        else resolve(message.result ?? {});
      };
      socket.addEventListener('message', onMessage);
      socket.send(JSON.stringify({ id, method }));
    });
  try {
    await send('HeapProfiler.collectGarbage');
    const usage = await send('Runtime.getHeapUsage');
    return { usedMiB: usage.usedSize / 2 ** 20, totalMiB: usage.totalSize / 2 ** 20 };
  } finally {
    socket.close();
  }
}
