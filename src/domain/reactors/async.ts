// Asynchronous reactor invocations (POST /reactors/{id}/react-async, GET /reactors/{id}/results/{requestId}). A
// request is stored at once as `pending` and run later by the API process that took it, through the same path as a
// synchronous invocation (ReactorService.react: detokenization, the runtime's fair shares, tokenization); its outcome
// (the body the synchronous call would have answered, or the error it would have answered with) is sealed with the
// tenant's data key, because reactor results may hold sensitive data, and kept on a lease of
// TOKENVAULT_ASYNC_RESULT_TTL_SECONDS counted from the request.
//
// The queue is in the memory of one API process, bounded per tenant (TOKENVAULT_ASYNC_QUEUE_LENGTH) and drained by at
// most TOKENVAULT_ASYNC_CONCURRENCY runs at once. A process that dies loses what it had queued or running: each process
// keeps a runner key on a short lease (`async-runners/<id>`, renewed every third of TOKENVAULT_ASYNC_RUNNER_LEASE_SECONDS), every pending
// record names its runner, and a pending record whose runner key is gone reads as failed (TV_ASYNC_REQUEST_LOST)
// instead of pending until its lease ends. A process that is shut down (SIGTERM) fails what it had not started and
// waits a little for what is running.
//
// What is kept is bounded for etcd's space (docs/security.md, "etcd space"): without bounds a reactor returning 1 MB
// stored 1.33 MB per result, and one tenant's 8.4 requests/s filled the 2 GiB quota in 3.2 minutes. A tenant with
// `resultsPerTenant` records (results, and requests not finished) is refused before anything runs; an outcome over
// `resultMaxBytes` is replaced by a TV_ASYNC_RESULT_TOO_LARGE failure, so the poller learns it ran and why it cannot
// read what it returned.
import { randomUUID } from 'node:crypto';
import { actorId, rightsOf, type TenantPrincipal } from '../../auth/principal.js';
import { Errors, isLimitCode, toProblem, VaultError } from '../../errors/registry.js';
import { keys } from '../../store/keys.js';
import { encode } from '../../store/codec.js';
import { getRecord, secondsUntil } from '../../store/records.js';
import type { Store } from '../../store/store.js';
import type { DataCipher } from '../tokens/records.js';
import { SETTINGS } from '../../config/config.js';
import { TenantLimit, type TenantLimitsSource } from '../tenant-limits.js';
import { CustomResponse, type ReactorService, type ReactResponse } from './service.js';

export type AsyncStatus = 'pending' | 'completed' | 'failed';

/** What became of a request, for the metrics: taken, refused (429), ended, or failed unstarted at shutdown. */
export type AsyncOutcome = 'accepted' | 'refused' | 'completed' | 'failed' | 'dropped';

/** What the synchronous call would have answered with, when it is not a 200. */
export interface AsyncFailure {
  status: number;
  headers?: Record<string, string>;
  body: unknown;
}

interface AsyncResultRecord {
  id: string;
  tenant_id: string;
  reactor_id: string;
  status: AsyncStatus;
  /** The API process that runs it (its runner key proves it is alive). */
  runner: string;
  created_at: string;
  created_by: string;
  expires_at: string;
  completed_at?: string;
  /** Ciphertext of `Outcome`, once there is one. */
  sealed?: string;
  /**
   * rightsOf the key the request ran under: the outcome is shown only to the same rights. Absent where the request
   * never got a key (revoked before it ran, lost at shutdown: the outcome is the problem saying so), and in records
   * stored by earlier versions, which are shown as they were so that polling clients survive an upgrade.
   */
  rights?: string;
}

type Outcome = { result: ReactResponse } | { error: AsyncFailure };

/** An outcome, with rightsOf the key it ran under when it got one. */
interface Ran {
  outcome: Outcome;
  rights?: string;
}

/** The wire form of GET /reactors/{id}/results/{requestId}. */
export interface AsyncResult {
  id: string;
  reactor_id: string;
  status: AsyncStatus;
  created_at: string;
  created_by: string;
  completed_at?: string;
  expires_at: string;
  /** When completed: the body POST /reactors/{id}/react would have answered. */
  result?: ReactResponse;
  /** When failed: the status, body (a problem document, or the reactor's custom response) and headers it would have. */
  error?: AsyncFailure;
}

export interface AsyncLimits {
  resultTtlSeconds: number;
  queueLength: number;
  concurrency: number;
  /** Bytes of args all queued and running requests of this process may hold together. */
  queueBytes: number;
  /** The runner key's lease; it is renewed every third of it. */
  runnerLeaseSeconds: number;
  /** Results and unfinished requests one tenant may have kept; 0: no limit. */
  resultsPerTenant?: number;
  /** The tenants' own limits, which replace resultsPerTenant for them. */
  tenantLimits?: TenantLimitsSource;
  /** Largest outcome (JSON bytes) kept; 0: any. */
  resultMaxBytes?: number;
}

/** On shutdown, the longest the service waits for runs in progress before it lets go of them. */
const STOP_WAIT_MS = 5_000;

interface Job {
  tenantId: string;
  id: string;
  /** Bytes of its args (JSON), counted against queueBytes until it ends. */
  bytes: number;
  run: () => Promise<Ran>;
}

export class AsyncReactorService {
  readonly runnerId = randomUUID();
  /** Requests not started yet, per tenant. */
  private readonly queued = new Map<string, Job[]>();
  /** When each tenant with requests here last had one started (a counter): the least recently served goes next. */
  private readonly lastServed = new Map<string, number>();
  private serves = 0;
  private readonly running = new Set<Promise<void>>();
  /** Requests running per tenant: at most `tenantConcurrency` each. */
  private readonly runningPerTenant = new Map<string, number>();
  /** Requests queued or running per tenant. */
  private readonly perTenant = new Map<string, number>();
  /** Bytes of args held by requests queued or running. */
  private heldBytes = 0;
  /** Bytes of args held per tenant: at most half of queueBytes each. */
  private readonly bytesPerTenant = new Map<string, number>();
  private heartbeat?: NodeJS.Timeout;
  private stopped = false;
  private readonly kept: TenantLimit;

  constructor(
    private readonly store: Store,
    private readonly cipher: DataCipher,
    private readonly reactors: ReactorService,
    private readonly limits: AsyncLimits,
    private readonly onOutcome: (outcome: AsyncOutcome) => void = () => {},
    /**
     * A run that failed at a documented limit, with the error's code: the failed result is the answer the synchronous
     * call would have sent, which tokenvault_limit_refusals_total counts there.
     */
    private readonly onLimitRefusal: (code: string) => void = () => {},
  ) {
    this.kept = new TenantLimit(
      store,
      'asyncResults',
      limits.resultsPerTenant ?? 0,
      (tenantId) => keys.asyncResult(tenantId, ''),
      limits.tenantLimits,
    );
  }

  async start(): Promise<void> {
    await this.beat();
    this.heartbeat = setInterval(
      () => {
        // A missed beat is retried at the next; the lease outlives three of them.
        this.beat().catch(() => {});
      },
      (this.limits.runnerLeaseSeconds * 1000) / 3,
    );
    this.heartbeat.unref();
  }

  /** Fails what has not started, waits a little for what runs, then gives up the runner key. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.heartbeat);
    const dropped = [...this.queued.values()].flat();
    this.queued.clear();
    await Promise.allSettled(
      dropped.map(async (job) => {
        this.release(job.tenantId, job.bytes);
        this.onOutcome('dropped');
        await this.finish(job.tenantId, job.id, {
          outcome: {
            error: failure(
              new Errors.AsyncRequestLost('The API process shut down before the request ran; send it again.'),
            ),
          },
        });
      }),
    );
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.running]),
      new Promise((resolve) => (timer = setTimeout(resolve, STOP_WAIT_MS))),
    ]);
    clearTimeout(timer);
    await this.store.delete(keys.asyncRunner(this.runnerId)).catch(() => false);
  }

  /** Requests queued and running in this process (tests, metrics). */
  usage(): { queued: number; running: number } {
    return { queued: [...this.queued.values()].reduce((n, jobs) => n + jobs.length, 0), running: this.running.size };
  }

  /**
   * Stores the request as pending and queues it; the id to ask for its result. `current` gives the requesting key's
   * principal when the request runs (it may have been revoked or narrowed while the request waited).
   */
  async submit(
    principal: TenantPrincipal,
    reactorId: string,
    args: unknown,
    current: () => Promise<TenantPrincipal>,
  ): Promise<string> {
    const tenantId = principal.tenantId;
    if (this.stopped) throw new Errors.RuntimeUnavailable('This API process is shutting down; retry.');
    if ((await this.reactors.nameOf(tenantId, reactorId)) === undefined)
      throw new Errors.NotFound('Reactor not found.');
    // Before anything is stored or queued: the pending record counts from here until it expires, result and all.
    await this.kept.assertRoomFor(tenantId);
    // Taken before the write so that concurrent requests cannot all pass the check.
    if ((this.perTenant.get(tenantId) ?? 0) >= this.limits.queueLength) {
      this.onOutcome('refused');
      throw new Errors.AsyncQueueFull({ headers: { 'Retry-After': '1' } });
    }
    // The args wait in memory until the request runs: their bytes are bounded for the process as a whole, and a
    // tenant holds at most half of that, so one tenant's queue (of requests that hang, say) never shuts others out.
    const bytes = Buffer.byteLength(JSON.stringify(args ?? null));
    const tenantBytes = this.bytesPerTenant.get(tenantId) ?? 0;
    if (this.heldBytes + bytes > this.limits.queueBytes || tenantBytes + bytes > this.limits.queueBytes / 2) {
      this.onOutcome('refused');
      throw new Errors.AsyncQueueFull({
        detail:
          'The asynchronous reactor requests queued on this API process hold as many bytes of args as allowed (TOKENVAULT_ASYNC_QUEUE_BYTES, of which one tenant may hold half); retry later.',
        headers: { 'Retry-After': '1' },
      });
    }
    this.perTenant.set(tenantId, (this.perTenant.get(tenantId) ?? 0) + 1);
    this.heldBytes += bytes;
    this.bytesPerTenant.set(tenantId, tenantBytes + bytes);
    const id = randomUUID();
    const now = new Date();
    const record: AsyncResultRecord = {
      id,
      tenant_id: tenantId,
      reactor_id: reactorId,
      status: 'pending',
      runner: this.runnerId,
      created_at: now.toISOString(),
      created_by: actorId(principal),
      expires_at: new Date(now.getTime() + this.limits.resultTtlSeconds * 1000).toISOString(),
    };
    try {
      await this.store.put(keys.asyncResult(tenantId, id), encode('async-result', record), {
        ttlSeconds: this.limits.resultTtlSeconds,
      });
    } catch (error) {
      this.release(tenantId, bytes);
      throw error;
    }
    const jobs = this.queued.get(tenantId) ?? [];
    jobs.push({ tenantId, id, bytes, run: async () => this.invoke(current, reactorId, args) });
    this.queued.set(tenantId, jobs);
    this.onOutcome('accepted');
    this.pump();
    return id;
  }

  async get(principal: TenantPrincipal, reactorId: string, id: string): Promise<AsyncResult> {
    const tenantId = principal.tenantId;
    const found = await getRecord<AsyncResultRecord>(this.store, 'async-result', keys.asyncResult(tenantId, id));
    const record = found?.value;
    // Another reactor's request is as unknown here as another tenant's, and so is another caller's: the result holds
    // what the requester's rights detokenized, which a key that may use fewer tokens must not read.
    if (
      !record ||
      record.reactor_id !== reactorId ||
      record.created_by !== actorId(principal) ||
      Date.parse(record.expires_at) <= Date.now()
    ) {
      throw new Errors.NotFound(
        'Async reactor request not found (results are kept for TOKENVAULT_ASYNC_RESULT_TTL_SECONDS).',
      );
    }
    const answer: AsyncResult = {
      id: record.id,
      reactor_id: record.reactor_id,
      status: record.status,
      created_at: record.created_at,
      created_by: record.created_by,
      ...(record.completed_at ? { completed_at: record.completed_at } : {}),
      expires_at: record.expires_at,
    };
    if (record.status === 'pending') {
      if (record.runner !== this.runnerId && !(await this.store.get(keys.asyncRunner(record.runner)))) {
        answer.status = 'failed';
        answer.error = failure(
          new Errors.AsyncRequestLost('The API process running the request stopped before it finished; send it again.'),
        );
      }
      return answer;
    }
    // The outcome shows what the rights it ran under let it detokenize (and do): once the application's permissions
    // or rules changed (narrowed, most of all), its keys no longer read it, as an idempotent answer is not replayed.
    if (record.rights !== undefined && record.rights !== rightsOf(principal)) {
      throw new Errors.Forbidden(
        "The key's permissions or rules changed since this request ran, so its result is not shown; send the request again.",
      );
    }
    if (record.sealed) {
      const outcome = JSON.parse(
        (await this.cipher.decrypt(tenantId, aad(tenantId, id), record.sealed)).toString('utf8'),
      ) as Outcome;
      Object.assign(answer, outcome);
    }
    return answer;
  }

  private async invoke(current: () => Promise<TenantPrincipal>, reactorId: string, args: unknown): Promise<Ran> {
    let rights: string | undefined;
    try {
      const principal = await current();
      rights = rightsOf(principal);
      return { outcome: { result: await this.reactors.react(principal, reactorId, args) }, rights };
    } catch (error) {
      return { outcome: this.failed(error), rights };
    }
  }

  private failed(error: unknown): Outcome {
    if (error instanceof CustomResponse)
      return { error: { status: error.status, headers: error.headers, body: error.body } };
    if (error instanceof VaultError) {
      if (isLimitCode(error.code)) this.onLimitRefusal(error.code);
      return { error: failure(error) };
    }
    return { error: failure(new Errors.Internal()) };
  }

  /** The outcome, or the failure saying it was too large to keep. */
  private bounded(ran: Ran): Ran {
    const max = this.limits.resultMaxBytes ?? 0;
    if (max === 0) return ran;
    const bytes = Buffer.byteLength(JSON.stringify(ran.outcome));
    if (bytes <= max) return ran;
    const error = new Errors.AsyncResultTooLarge({
      detail: `The reactor ran, but its ${'error' in ran.outcome ? 'error' : 'result'} (${bytes} bytes as JSON) was larger than ${SETTINGS.asyncResultMaxBytes.env} = ${max} and was not stored; what it did (tokens it created, say) stands. Call POST /reactors/{id}/react for results this large.`,
      errors: { limit: [SETTINGS.asyncResultMaxBytes.env] },
    });
    this.onLimitRefusal(error.code);
    return { outcome: { error: failure(error) }, rights: ran.rights };
  }

  /**
   * A tenant runs at most half of the slots (at least one), so a tenant whose requests hang to their time limit leaves
   * the other half to the others: with every slot taken by one tenant, another tenant's request waited that long.
   */
  private get tenantConcurrency(): number {
    return Math.max(1, Math.floor(this.limits.concurrency / 2));
  }

  /**
   * Starts queued requests while there is room, the least recently served tenant below its share first, so that one
   * tenant's backlog is not a wall in front of another tenant's request.
   */
  private pump(): void {
    while (!this.stopped && this.running.size < this.limits.concurrency) {
      let tenantId: string | undefined;
      let oldest = Infinity;
      for (const candidate of this.queued.keys()) {
        if ((this.runningPerTenant.get(candidate) ?? 0) >= this.tenantConcurrency) continue;
        const served = this.lastServed.get(candidate) ?? 0;
        if (served < oldest) [tenantId, oldest] = [candidate, served];
      }
      if (tenantId === undefined) return;
      const jobs = this.queued.get(tenantId)!;
      const job = jobs.shift()!;
      if (jobs.length === 0) this.queued.delete(tenantId);
      this.lastServed.set(tenantId, ++this.serves);
      this.runningPerTenant.set(tenantId, (this.runningPerTenant.get(tenantId) ?? 0) + 1);
      const done = this.execute(job);
      this.running.add(done);
      void done.finally(() => {
        this.running.delete(done);
        const left = this.runningPerTenant.get(job.tenantId)! - 1;
        if (left === 0) this.runningPerTenant.delete(job.tenantId);
        else this.runningPerTenant.set(job.tenantId, left);
        this.release(job.tenantId, job.bytes);
        this.pump();
      });
    }
  }

  /** Never rejects. */
  private async execute(job: Job): Promise<void> {
    try {
      const ran = this.bounded(await job.run());
      this.onOutcome('error' in ran.outcome ? 'failed' : 'completed');
      await this.finish(job.tenantId, job.id, ran);
    } catch {
      // The store failed while writing the outcome: the record stays pending until this runner is gone or the lease
      // ends; nothing else can be done with it here.
    }
  }

  /** Seals and writes the outcome over the pending record, unless the record is gone (expired, tenant deleted). */
  private async finish(tenantId: string, id: string, { outcome, rights }: Ran): Promise<void> {
    const key = keys.asyncResult(tenantId, id);
    for (let attempt = 0; attempt < 3; attempt++) {
      const found = await getRecord<AsyncResultRecord>(this.store, 'async-result', key);
      if (!found) return;
      const record: AsyncResultRecord = {
        ...found.value,
        status: 'error' in outcome ? 'failed' : 'completed',
        completed_at: new Date().toISOString(),
        sealed: await this.cipher.encrypt(tenantId, aad(tenantId, id), JSON.stringify(outcome)),
        ...(rights !== undefined ? { rights } : {}),
      };
      const ttlSeconds = secondsUntil(record.expires_at);
      if (await this.store.compareAndSwap(key, found.modRevision, encode('async-result', record), { ttlSeconds }))
        return;
    }
  }

  private release(tenantId: string, bytes: number): void {
    this.heldBytes -= bytes;
    const left = (this.perTenant.get(tenantId) ?? 1) - 1;
    if (left <= 0) {
      this.perTenant.delete(tenantId);
      this.bytesPerTenant.delete(tenantId);
      this.lastServed.delete(tenantId);
    } else {
      this.perTenant.set(tenantId, left);
      this.bytesPerTenant.set(tenantId, (this.bytesPerTenant.get(tenantId) ?? bytes) - bytes);
    }
  }

  private async beat(): Promise<void> {
    await this.store.put(keys.asyncRunner(this.runnerId), '', {
      ttlSeconds: this.limits.runnerLeaseSeconds,
    });
  }
}

function aad(tenantId: string, id: string): string {
  return `async-result:${tenantId}:${id}`;
}

function failure(error: VaultError): AsyncFailure {
  return { status: error.status, body: toProblem(error) };
}
