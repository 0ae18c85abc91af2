// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection package does it:
//   - a candidate reads the Lease every retry period; it takes it when there is none (create), when it is free
//     (holderIdentity empty: released) or when it has expired. Expiry is judged by the local clock from the moment this
//     process last saw the Lease change (its resourceVersion), never from the renewTime written by another machine,
//     so clock skew between nodes does not matter;
//   - every write is a PUT carrying the resourceVersion read (optimistic concurrency): of two candidates racing for
//     an expired Lease one gets 409 Conflict and stays a candidate;
//   - the leader renews every renew period; when no renewal has succeeded for renewDeadline it stops leading at once
//     (before anyone else can take over: renewDeadline < leaseDuration, and others wait a full leaseDuration from
//     their last sight of a renewal). A process that stopped leading waits until its reconciles have ended before it
//     campaigns again;
//   - stop() stops leading (waiting for the reconciles) and then releases the Lease (holderIdentity emptied), so a
//     standby takes over at its next retry instead of after a full leaseDuration.
import os from 'node:os';
import type { Logger } from '../observability/logger.js';
import {
  isAlreadyExists,
  isConflict,
  isNotFound,
  microTime,
  Resources,
  type KubeClient,
  type KubeObject,
} from './kube.js';

export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  /** Default: defaultIdentity(). Two candidates must never share one. */
  identity?: string;
  /** How long a lease lasts without renewal, as seen by the others (default 15 s; written in whole seconds). */
  leaseDurationMs?: number;
  /** The leader steps down when it could not renew for this long (default 10 s; must be < leaseDurationMs). */
  renewDeadlineMs?: number;
  /** How often the leader renews and a candidate retries (default 2 s). */
  retryPeriodMs?: number;
  logger?: Logger;
}

export interface LeaderCallbacks {
  /** This process now leads. Not awaited: renewals go on meanwhile. */
  onStartedLeading(): void;
  /** This process no longer leads (lost, or stopping). Awaited before campaigning again or releasing the Lease. */
  onStoppedLeading(): Promise<void> | void;
}

/** `$POD_NAME` (set from the downward API), else the host name; then the process id. */
export function defaultIdentity(): string {
  return `${process.env.POD_NAME || os.hostname()}_${process.pid}`;
}

export class LeaderElector {
  readonly identity: string;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private leading = false;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private deadline: NodeJS.Timeout | undefined;
  private stepping: Promise<void> | undefined;
  /** The Lease as last read or written, and when (local clock) its resourceVersion last changed. */
  private observed: { lease: Lease; at: number } | undefined;

  constructor(
    private readonly client: KubeClient,
    private readonly options: LeaderElectionOptions,
    private readonly callbacks: LeaderCallbacks,
  ) {
    this.identity = options.identity ?? defaultIdentity();
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? Math.min(10_000, Math.round((this.leaseDurationMs * 2) / 3));
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    if (this.renewDeadlineMs >= this.leaseDurationMs)
      throw new Error('renewDeadlineMs must be shorter than leaseDurationMs');
    if (this.retryPeriodMs >= this.renewDeadlineMs)
      throw new Error('retryPeriodMs must be shorter than renewDeadlineMs');
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /** The holder named in the Lease as last seen ('' when free). */
  get observedHolder(): string | undefined {
    return this.observed ? (this.observed.lease.spec?.holderIdentity ?? '') : undefined;
  }

  start(): void {
    if (this.loop || this.stopped) return;
    this.loop = this.run();
  }

  /** Stops campaigning; if leading, stops leading (awaiting onStoppedLeading) and releases the Lease. */
  async stop(): Promise<void> {
    if (this.stopped) return this.loop;
    this.stopped = true;
    this.wake?.();
    await this.loop;
    const wasLeading = this.leading;
    await this.stepDown('stopping');
    if (wasLeading) await this.release();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (this.stepping) await this.stepping;
      if (this.stopped) break;
      const attemptAt = Date.now();
      const acquired = await this.tryAcquireOrRenew(attemptAt);
      if (this.stopped) break;
      // A renewal that succeeded only after the deadline made this process step down: finish stepping down first;
      // the next round renews again (the Lease still names this process) and leads anew.
      if (acquired && !this.stepping) {
        this.armDeadline(attemptAt);
        if (!this.leading) {
          this.leading = true;
          this.options.logger?.info({ lease: this.leaseName, identity: this.identity }, 'leader election: leading');
          try {
            this.callbacks.onStartedLeading();
          } catch (error) {
            this.options.logger?.error({ err: String(error) }, 'onStartedLeading failed');
          }
        }
      }
      // Candidates retry with some jitter (client-go's JitterFactor 1.2), so they do not poll in lockstep.
      const wait = this.leading ? this.retryPeriodMs : this.retryPeriodMs * (1 + Math.random() * 0.2);
      await this.sleep(wait);
    }
  }

  private get leaseName(): string {
    return `${this.options.namespace}/${this.options.name}`;
  }

  /** A renewal is due within renewDeadline of the last success; the timer firing means leadership is lost. */
  private armDeadline(renewedAt: number): void {
    clearTimeout(this.deadline);
    // Measured from when the successful request started: the others may have seen the renewal that early.
    this.deadline = setTimeout(
      () => {
        this.options.logger?.warn(
          { lease: this.leaseName, identity: this.identity },
          'leader election: could not renew the lease in time, stopping',
        );
        void this.stepDown('renew deadline passed');
      },
      Math.max(0, renewedAt + this.renewDeadlineMs - Date.now()),
    );
    this.deadline.unref?.();
  }

  private stepDown(why: string): Promise<void> {
    clearTimeout(this.deadline);
    if (!this.leading) return this.stepping ?? Promise.resolve();
    this.leading = false;
    this.options.logger?.info(
      { lease: this.leaseName, identity: this.identity, why },
      'leader election: stopped leading',
    );
    this.stepping = (async () => {
      try {
        await this.callbacks.onStoppedLeading();
      } catch (error) {
        this.options.logger?.error({ err: String(error) }, 'onStoppedLeading failed');
      }
    })().finally(() => {
      this.stepping = undefined;
    });
    return this.stepping;
  }

  /** One read and, when allowed, one write; true when this process holds the Lease afterwards. */
  private async tryAcquireOrRenew(now: number): Promise<boolean> {
    const requestOptions = { timeoutMs: Math.max(500, this.renewDeadlineMs - this.retryPeriodMs) };
    const spec: LeaseSpec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.max(1, Math.ceil(this.leaseDurationMs / 1000)),
      acquireTime: microTime(new Date(now)),
      renewTime: microTime(new Date(now)),
      leaseTransitions: 0,
    };
    try {
      let lease: Lease;
      try {
        lease = await this.client.get<Lease>(
          Resources.leases,
          this.options.namespace,
          this.options.name,
          requestOptions,
        );
      } catch (error) {
        if (!isNotFound(error)) throw error;
        const created = await this.client.create<Lease>(
          Resources.leases,
          this.options.namespace,
          { metadata: { name: this.options.name, namespace: this.options.namespace }, spec },
          requestOptions,
        );
        this.observed = { lease: created, at: now };
        return true;
      }
      if (this.observed?.lease.metadata?.resourceVersion !== lease.metadata?.resourceVersion) {
        this.observed = { lease, at: now };
      }
      const current = lease.spec ?? {};
      const holder = current.holderIdentity ?? '';
      const durationMs = (current.leaseDurationSeconds ?? Math.ceil(this.leaseDurationMs / 1000)) * 1000;
      const valid = this.observed!.at + durationMs > now;
      if (holder !== '' && holder !== this.identity && valid) {
        if (this.leading) void this.stepDown(`the lease is held by ${holder}`);
        return false;
      }
      if (holder === this.identity) {
        spec.acquireTime = current.acquireTime ?? spec.acquireTime;
        spec.leaseTransitions = current.leaseTransitions ?? 0;
      } else {
        spec.leaseTransitions = (current.leaseTransitions ?? 0) + 1;
      }
      const updated = await this.client.replace<Lease>(
        Resources.leases,
        this.options.namespace,
        this.options.name,
        { metadata: { ...lease.metadata, managedFields: undefined }, spec },
        requestOptions,
      );
      this.observed = { lease: updated, at: now };
      return true;
    } catch (error) {
      if (!isConflict(error) && !isAlreadyExists(error)) {
        this.options.logger?.warn(
          { lease: this.leaseName, err: String(error) },
          'leader election: lease request failed',
        );
      }
      return false;
    }
  }

  /** Empties holderIdentity (client-go's release), when the Lease still names this process. */
  private async release(): Promise<void> {
    const lease = this.observed?.lease;
    if (!lease || (lease.spec?.holderIdentity ?? '') !== this.identity) return;
    const now = microTime();
    try {
      const released = await this.client.replace<Lease>(
        Resources.leases,
        this.options.namespace,
        this.options.name,
        {
          metadata: { ...lease.metadata, managedFields: undefined },
          spec: {
            holderIdentity: '',
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: lease.spec?.leaseTransitions ?? 0,
          },
        },
        { timeoutMs: 5_000 },
      );
      this.observed = { lease: released, at: Date.now() };
      this.options.logger?.info({ lease: this.leaseName, identity: this.identity }, 'leader election: lease released');
    } catch (error) {
      // Someone else wrote it meanwhile, or the API is away: the lease then expires on its own.
      this.options.logger?.warn(
        { lease: this.leaseName, err: String(error) },
        'leader election: could not release the lease',
      );
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }
}
