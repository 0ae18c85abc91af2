// Leases shared by the keys put with a time to live, as kube-apiserver shares them between Events
// (k8s.io/apiserver storage/etcd3/lease_manager.go, --lease-reuse-duration-seconds). Granting a lease per key costs a
// round trip before every such write (a token intent, a session, an idempotency record), and etcd keeps, checkpoints
// and revokes every lease one by one: a day's token intents at a thousand a second would be 86 million leases. Here a
// lease granted for a time to live serves the keys asking for about the same one while it lasts: a key's lease ends
// no earlier than its time to live asks, and at most `reuseSeconds(ttl)` later (5% of it, at most 60 s, and none under
// 20 s: a replica's heartbeat keeps its exact lease). Readers that must not see a record past its time compare its
// expiry themselves (token intents, sessions), as they already did for etcd's own lateness in revoking.
import { leaseSeconds } from './common.js';

/** The share of a time to live a key may outlive it by, and the cap (kube-apiserver's default reuse window). */
const REUSE_FRACTION = 0.05;
const MAX_REUSE_SECONDS = 60;
/** Keys one lease carries at most: its revocation deletes them in one etcd transaction. */
const MAX_KEYS_PER_LEASE = 1000;
/** Leases remembered at most (one per time to live in use, about). */
const MAX_LEASES = 32;

interface SharedLease {
  id: Promise<string>;
  /** The id, once granted. */
  granted?: string;
  /** Epoch ms by which etcd has not yet revoked it: measured from before the grant was sent, so never later. */
  expiresAt: number;
  keys: number;
}

/** How much longer than asked a key put with this time to live may live. */
export function reuseSeconds(ttlSeconds: number): number {
  return Math.min(MAX_REUSE_SECONDS, Math.floor(leaseSeconds(ttlSeconds) * REUSE_FRACTION));
}

export class LeasePool {
  private leases: SharedLease[] = [];

  constructor(
    /** Grants a lease of this many seconds; resolves with its id. */
    private readonly grant: (seconds: number) => Promise<string>,
    private readonly now: () => number = Date.now,
  ) {}

  /** A lease that lasts at least `ttlSeconds` from now and at most `reuseSeconds(ttlSeconds)` longer. */
  leaseFor(ttlSeconds: number): Promise<string> {
    const seconds = leaseSeconds(ttlSeconds);
    const spare = reuseSeconds(seconds);
    if (spare === 0) return this.grant(seconds);
    const now = this.now();
    this.leases = this.leases.filter((lease) => lease.expiresAt > now);
    const fits = (lease: SharedLease) =>
      lease.keys < MAX_KEYS_PER_LEASE &&
      lease.expiresAt - now >= seconds * 1000 &&
      lease.expiresAt - now <= (seconds + spare) * 1000;
    let lease = this.leases.find(fits);
    if (!lease) {
      lease = { id: this.grant(seconds + spare), expiresAt: now + (seconds + spare) * 1000, keys: 0 };
      const shared = lease;
      // A grant that fails is not kept: the next caller asks for a new one.
      shared.id.then(
        (id) => (shared.granted = id),
        () => this.drop(shared),
      );
      this.leases.push(shared);
      if (this.leases.length > MAX_LEASES) this.leases.shift();
    }
    lease.keys++;
    return lease.id;
  }

  /** Stops handing out a lease etcd no longer has (revoked, or lost with a restore): the next key gets a new one. */
  forget(id: string): void {
    this.leases = this.leases.filter((lease) => lease.granted !== id);
  }

  private drop(lease: SharedLease): void {
    this.leases = this.leases.filter((other) => other !== lease);
  }
}
