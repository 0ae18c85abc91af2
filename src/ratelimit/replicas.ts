// How many API processes share the rate limits. Counters live in each process (an etcd write per request would cost
// more than the request), so each process enforces its share: the limit divided by the API processes alive. Each
// process keeps a key with a short lease under `replicas/api/` and counts the keys there, so the share follows the
// autoscaler within a refresh, and a killed process drops out when its lease runs out. While the store cannot be
// reached the last count holds.
import { randomUUID } from 'node:crypto';
import { keys } from '../store/keys.js';
import type { Store } from '../store/store.js';

export interface ReplicaCountOptions {
  /** How often the process renews its key and counts the others. */
  refreshMs?: number;
  /** Lease of the key: a process gone this long no longer counts. */
  ttlSeconds?: number;
}

export class ReplicaCount {
  private readonly id = randomUUID();
  private replicas = 1;
  private timer?: NodeJS.Timeout;
  private readonly refreshMs: number;
  private readonly ttlSeconds: number;

  constructor(
    private readonly store: Store,
    options: ReplicaCountOptions = {},
  ) {
    this.refreshMs = options.refreshMs ?? 3000;
    this.ttlSeconds = options.ttlSeconds ?? 10;
  }

  /** API processes alive, this one included (at least 1). */
  get count(): number {
    return this.replicas;
  }

  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    // Leaving at once lets the others take over the share now rather than when the lease runs out.
    await this.store.delete(keys.apiReplica(this.id)).catch(() => undefined);
  }

  private async refresh(): Promise<void> {
    try {
      await this.store.put(keys.apiReplica(this.id), '', { ttlSeconds: this.ttlSeconds });
      this.replicas = Math.max(1, await this.store.count(keys.apiReplicas));
    } catch {
      // The store is unavailable: keep the last count (the requests themselves will fail or wait on the store anyway).
    }
  }
}
