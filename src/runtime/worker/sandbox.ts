// The sandbox pool: one isolated-vm isolate per (tenant, code hash, heap size), with the prelude and the reactor's
// code compiled into it once, kept in a bounded LRU (evicted isolates are disposed once no invocation uses them).
//
// An invocation runs in a context of that isolate: the prelude runs first, then the code's module wrapper, then the
// exported function with `req` copied in as JSON. Creating a context costs ~0.5 ms of CPU, most of an invocation, so
// one that served an invocation successfully, with nothing of it left running, is kept (a warm context) for the next
// invocation with the same `contextKey` (the API's reactor or proxy transform) and configuration, as a warm serverless
// function is: module-level state may persist between invocations of one reactor, never between reactors, tenants
// or after a failure. Without a contextKey every invocation gets a fresh context. A reactor whose warm starts are
// quick starts synchronously on the worker's thread, within a 20 ms slice (docs/runtime.md, "Synchronous warm
// starts"). Limits:
//   - CPU: every piece of work the isolate does for an invocation is a task the host starts (the first call, and each
//     answer to a host operation, which runs the code's continuations), and each gets isolated-vm's `timeout` set to
//     what is left of the invocation's CPU budget, measured with `isolate.cpuTime`. A busy loop anywhere — sync, in a
//     promise executor, after an await — is terminated when the budget runs out; the isolate stays usable.
//   - Wall clock: the invocation is answered when `timeoutMs` passes; its context is released and its host
//     operations aborted, so a never-settling promise costs nothing afterwards.
//   - Memory: the isolate's heap limit. isolated-vm disposes an isolate that exceeds it; the entry is dropped and the
//     next invocation of that code builds a new one.
// Invocations of the same code share its isolate (a memory-limit kill ends all of them; a CPU timeout only its own).
//
// Noisy neighbours: code that used up its CPU budget or its heap is a suspect for a while (SUSPECT_MS). Suspects'
// tasks (the units of isolate work above) run through a lane of their own, at most `availableParallelism - 1` at a
// time (at least 1), and each keeps its slot closed afterwards for as long as it computed, so suspects together get
// at most half of those cores and well-behaved reactors keep their latency; waiting for I/O holds no slot. A tenant whose code failed that way TENANT_STRIKES times within the window
// is a suspect with all its code. Waiting for the lane counts against the invocation's wall clock.
import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import ivm from 'isolated-vm';
import { LRUCache } from 'lru-cache';
import type { Logger } from '../../observability/logger.js';
import type { BtAnswer, BtCall } from './bt-bridge.js';
import type { InvocationFailure, InvocationLimits, InvocationRequest, InvocationResult } from '../contract.js';
import {
  compileFailure,
  exceededResources,
  hostLimitFailure,
  memoryFailure,
  readEnvelope,
  resultTooLargeFailure,
  thrownFailure,
  timeoutFailure,
  type Envelope,
} from './failures.js';
import type { InvocationOutcome, RuntimeMetrics } from './metrics.js';
import { MAX_OUTBOUND_RESPONSE_BYTES, refuseOutbound, type Outbound } from './outbound.js';
import { PRELUDE_SOURCE, wrapReactorCode } from './prelude.js';

/** What the sandbox's `bt` client calls on the host (bt-bridge.ts). */
export interface BtHost {
  call(apiKey: string, call: BtCall, signal: AbortSignal): Promise<BtAnswer>;
}

export interface SandboxPoolOptions {
  /** Isolates kept (config.runtime.cacheSize). */
  cacheSize: number;
  /** Limits for requests that do not set their own (config.runtime). */
  limits: InvocationLimits;
  /** `fetch` inside the sandbox; refuses everything when absent. */
  outbound?: Outbound;
  /** `bt` inside the sandbox; without it every bt call fails with a clear message. */
  bt?: BtHost;
  metrics?: RuntimeMetrics;
  logger?: Logger;
  /** isolated-vm lost control of an isolate: the process should stop serving (the worker exits). */
  onCatastrophicError?: (message: string) => void;
  /** Suspect invocations (see above) allowed to run at once; default availableParallelism() - 1, at least 1. */
  suspectConcurrency?: number;
  /** Largest result (JSON) of one invocation (config.sizeLimits.maxResultBytes); default 4 MiB. */
  maxResultBytes?: number;
  /**
   * Bytes the code may pass to the host in one invocation (config.sizeLimits.sandboxHostBytes): hash inputs, fetch and
   * bt requests. Counted by the prelude before anything is copied out of the isolate (a loop of hash updates with one
   * big string would otherwise copy it again and again into the worker's heap), and again here. Default 64 MiB.
   */
  maxHostBytes?: number;
}

/** How long code stays a suspect after exceeding its CPU or memory limit. */
export const SUSPECT_MS = 60_000;
/** Resource-limit failures after which all of a tenant's code is a suspect (new code each time does not escape). */
export const TENANT_STRIKES = 3;

/** A request the pool refuses to run (the worker answers 400). */
export class InvalidInvocation extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidInvocation';
  }
}

/** An invocation without its code, for code this pool does not have (the worker answers 409; nothing ran). */
export class CodeRequired extends Error {
  constructor() {
    super('this worker does not have the code of this code hash; send the invocation again with its code');
    this.name = 'CodeRequired';
  }
}

const HASHES = new Set(['md5', 'sha1', 'sha256', 'sha384', 'sha512']);
const DIGEST_ENCODINGS = new Set(['hex', 'base64', 'base64url', 'latin1', 'binary']);
const ENOUGH = 1; // ms: the least timeout handed to isolated-vm (0 would mean none)
/**
 * Warm contexts kept per isolate, at most: enough for every invocation of one reactor in flight at once under load
 * (the API keeps 32 connections per replica), or contexts are created and dropped on every call.
 */
const WARM_PER_ISOLATE = 64;
/** Heap (MB) allowed per idle context: one context costs ~0.2 MB, so idle contexts take at most a tenth of the heap. */
const HEAP_MB_PER_WARM_CONTEXT = 2;
/** A warm context unused this long is released when next looked at. */
const WARM_IDLE_MS = 60_000;
/** Invocations one context serves before it is replaced (bounds what module state can accumulate). */
const WARM_MAX_USES = 10_000;
/**
 * Synchronous warm starts (see `startSync`): after this many warm starts in a row that each took under SYNC_QUICK_NS
 * of CPU, a reactor's warm starts run on the worker's thread; one that takes longer makes it learn again.
 */
const SYNC_AFTER = 3;
const SYNC_QUICK_NS = 1_000_000n;
/** The longest a synchronous start may hold the worker's thread; beyond it the call is stopped and run again the usual way. */
const SYNC_SLICE_MS = 20;
/** Defaults of SandboxPoolOptions.maxResultBytes and maxHostBytes. */
const DEFAULT_MAX_RESULT_BYTES = 4 * 1024 * 1024;
const DEFAULT_MAX_HOST_BYTES = 64 * 1024 * 1024;
/** The next spare isolate is prepared after this long without an invocation (see wantSpare)... */
const SPARE_QUIET_MS = 2;
/** ...or after this long at the latest. */
const SPARE_MAX_WAIT_MS = 100;

/** What a context's host functions reach: the invocation it is serving now, if any. */
interface InvocationHooks {
  call(id: number, op: string, json: string, body: unknown): void;
  sync(op: string, json: string, parts: unknown): string;
}

/** What compileScript returns with cachedData options (isolated-vm sets these; its typings omit them). */
type CachingScript = ivm.Script & ivm.CachedDataResult & { cachedDataRejected?: boolean };

/**
 * An isolate with the prelude compiled, and a context with the prelude run in it when that worked (see
 * SandboxPool.prepareSpare).
 */
interface Prepared {
  isolate: ivm.Isolate;
  prelude: ivm.Script;
  context?: SandboxContext;
}

/** The isolate prepared for the next new code, for one heap size; `ready` rejects when it is no longer wanted. */
interface Spare {
  memoryMb: number;
  ready: Promise<Prepared>;
}

/** A context with the prelude run in it; `entry` is the prelude's dispatcher. */
class SandboxContext {
  hooks?: InvocationHooks;
  entry?: ivm.Reference;
  uses = 0;
  idleSince = 0;

  constructor(readonly context: ivm.Context) {
    // The host functions reach whichever invocation the context serves at the time (none between invocations, nor
    // before the first: a context prepared in a spare isolate has no hooks until an invocation takes it).
    const global = context.global;
    global.setIgnored(
      '__tv_call',
      new ivm.Callback((id: number, op: string, json: string, body: unknown) => this.hooks?.call(id, op, json, body), {
        ignored: true,
      }),
    );
    global.setIgnored(
      '__tv_sync',
      new ivm.Callback((op: string, json: string, parts: unknown) => {
        if (this.hooks === undefined) throw new Error('the invocation has ended');
        return this.hooks.sync(op, json, parts);
      }),
    );
  }

  release(): void {
    this.hooks = undefined;
    this.entry?.release();
    this.context.release();
  }
}

class CompiledSandbox {
  active = 0;
  retired = false;
  /**
   * Calls into the isolate started asynchronously and not finished: a synchronous call is made only when there are
   * none, so that it never waits for the isolate (isolated-vm would block the worker's thread until they are done).
   */
  busy = 0;
  /** Quick warm starts in a row (see SYNC_AFTER); -1 once a synchronous start overran its slice: never again. */
  quickStarts = 0;
  /** Set when isolated-vm disposed the isolate for exceeding its heap limit. */
  outOfMemory = false;
  /** Warm contexts by reuse key (contextKey and configuration), most recently parked last. */
  private readonly idle = new Map<string, SandboxContext[]>();
  private idleCount = 0;

  constructor(
    readonly key: string,
    readonly isolate: ivm.Isolate,
    readonly prelude: ivm.Script,
    readonly script: ivm.Script,
    readonly memoryMb: number,
    /** A context with the prelude run, prepared in the spare isolate: the first fresh context this code needs. */
    private prepared?: SandboxContext,
  ) {}

  /** The prepared context, once (see `prepared`). */
  takePrepared(): SandboxContext | undefined {
    const prepared = this.prepared;
    this.prepared = undefined;
    return prepared;
  }

  get usable(): boolean {
    return !this.retired && !this.isolate.isDisposed;
  }

  /** Whether a warm start may run synchronously now. */
  get startsSync(): boolean {
    return this.quickStarts >= SYNC_AFTER && this.busy === 0;
  }

  /** Learns from the CPU time a warm start took. */
  noteStart(cpuNs: bigint): void {
    if (this.quickStarts < 0) return;
    this.quickStarts = cpuNs < SYNC_QUICK_NS ? this.quickStarts + 1 : 0;
  }

  /** Counts an asynchronous call into the isolate while it runs. */
  track<T>(promise: Promise<T>): Promise<T> {
    this.busy++;
    const done = () => void this.busy--;
    promise.then(done, done);
    return promise;
  }

  /** A warm context for this reuse key, if one is parked and not too old. */
  take(reuseKey: string): SandboxContext | undefined {
    const list = this.idle.get(reuseKey);
    while (list && list.length > 0) {
      const context = list.pop()!;
      this.idleCount--;
      if (list.length === 0) this.idle.delete(reuseKey);
      if (performance.now() - context.idleSince <= WARM_IDLE_MS) return context;
      context.release();
    }
    return undefined;
  }

  /** Keeps a context for the next invocation with this key, releasing the longest-idle one when there are enough. */
  park(reuseKey: string, context: SandboxContext): void {
    const limit = Math.min(WARM_PER_ISOLATE, Math.floor(this.memoryMb / HEAP_MB_PER_WARM_CONTEXT));
    if (!this.usable || limit === 0) return context.release();
    if (this.idleCount >= limit) this.releaseOldest();
    context.idleSince = performance.now();
    const list = this.idle.get(reuseKey);
    if (list) list.push(context);
    else this.idle.set(reuseKey, [context]);
    this.idleCount++;
  }

  private releaseOldest(): void {
    let oldest: [string, SandboxContext[]] | undefined;
    for (const entry of this.idle) if (!oldest || entry[1][0].idleSince < oldest[1][0].idleSince) oldest = entry;
    if (!oldest) return;
    const [key, list] = oldest;
    list.shift()!.release();
    this.idleCount--;
    if (list.length === 0) this.idle.delete(key);
  }
}

export class SandboxPool {
  private readonly cache: LRUCache<string, CompiledSandbox>;
  /** Code that does not compile, so it is not compiled again on every call. */
  private readonly broken: LRUCache<string, InvocationFailure>;
  private readonly compiling = new Map<string, Promise<CompiledSandbox | InvocationFailure>>();
  private readonly live = new Set<CompiledSandbox>();
  private readonly outbound: Outbound;
  private closed = false;
  private readonly suspects = new LRUCache<string, true>({ max: 10_000, ttl: SUSPECT_MS });
  /** Resource-limit failures per tenant: a tenant with TENANT_STRIKES of them is a suspect with all its code. */
  private readonly strikes = new LRUCache<string, number>({ max: 10_000, ttl: SUSPECT_MS });
  private readonly suspectLane: Lane;
  /** An isolate with the prelude compiled, waiting for the next new code (see preparedIsolate). */
  private spare?: Spare;
  /**
   * The heap size of the spare to prepare next (see wantSpare), and the timer that waits for a quiet moment to do it.
   */
  private spareWanted?: { memoryMb: number; since: number; timer: NodeJS.Timeout };
  /** Invocations in `invoke` now, and when one last started or ended (see wantSpare). */
  private running = 0;
  private lastActivity = 0;
  /** V8's code cache of the prelude, produced by the first isolate (see compilePrelude). */
  private preludeCache?: ivm.ExternalCopy<ArrayBuffer>;

  constructor(private readonly options: SandboxPoolOptions) {
    this.outbound = options.outbound ?? refuseOutbound;
    this.cache = new LRUCache<string, CompiledSandbox>({
      max: Math.max(1, options.cacheSize),
      dispose: (sandbox) => this.retire(sandbox),
    });
    this.broken = new LRUCache<string, InvocationFailure>({ max: Math.max(1, options.cacheSize) });
    this.suspectLane = new Lane(options.suspectConcurrency ?? Math.max(1, availableParallelism() - 1));
  }

  /** Isolates alive now (cached, or evicted and still finishing an invocation). */
  get isolates(): number {
    return this.live.size;
  }

  /** Runs one invocation. Code failures are results; only a request that cannot be run at all throws. */
  async invoke(request: InvocationRequest): Promise<InvocationResult> {
    if (this.closed) throw new Error('the sandbox pool is closed');
    this.running++;
    this.lastActivity = performance.now();
    try {
      return await this.invokeNow(request);
    } finally {
      this.running--;
      this.lastActivity = performance.now();
    }
  }

  private async invokeNow(request: InvocationRequest): Promise<InvocationResult> {
    const started = performance.now();
    const limits = this.limitsFor(request);
    const acquired = await this.claim(request, limits.memoryMb);
    const suspectKey = `${request.tenantId}\u0000${request.codeHash}`;
    let envelope: Envelope;
    if ('kind' in acquired) {
      envelope = { ok: false, error: acquired };
    } else {
      const suspect = this.suspects.has(suspectKey) || (this.strikes.get(request.tenantId) ?? 0) >= TENANT_STRIKES;
      try {
        envelope = await this.run(acquired, request, limits, started, suspect ? this.suspectLane : undefined);
      } finally {
        acquired.active--;
        if (acquired.isolate.isDisposed) this.evict(acquired);
        else if (acquired.retired) this.release(acquired);
      }
      if (!envelope.ok && exceededResources(envelope.error)) {
        this.suspects.set(suspectKey, true);
        this.strikes.set(request.tenantId, (this.strikes.get(request.tenantId) ?? 0) + 1);
      }
    }
    const durationMs = Math.round((performance.now() - started) * 1000) / 1000;
    const outcome: InvocationOutcome = envelope.ok ? 'ok' : envelope.error.kind;
    this.options.metrics?.observeInvocation(outcome, durationMs / 1000);
    if (!envelope.ok && (outcome === 'timeout' || outcome === 'memory')) {
      this.options.logger?.warn(
        { tenant_id: request.tenantId, code_hash: request.codeHash, outcome, duration_ms: durationMs },
        'reactor invocation stopped',
      );
    }
    return envelope.ok
      ? { ok: true, result: envelope.result, durationMs }
      : { ok: false, error: envelope.error, durationMs };
  }

  /** Disposes every isolate; invocations still running fail. */
  close(): void {
    this.closed = true;
    clearTimeout(this.spareWanted?.timer);
    this.spareWanted = undefined;
    void this.spare?.ready.then(({ isolate }) => isolate.dispose()).catch(() => undefined);
    this.spare = undefined;
    this.cache.clear();
    for (const sandbox of [...this.live]) {
      sandbox.retired = true;
      this.release(sandbox, true);
    }
  }

  private limitsFor(request: InvocationRequest): InvocationLimits {
    const pick = (value: number | undefined, fallback: number) =>
      Number.isInteger(value) && (value as number) > 0 ? (value as number) : fallback;
    const defaults = this.options.limits;
    return {
      cpuMs: pick(request.limits?.cpuMs, defaults.cpuMs),
      timeoutMs: pick(request.limits?.timeoutMs, defaults.timeoutMs),
      memoryMb: Math.max(8, pick(request.limits?.memoryMb, defaults.memoryMb)),
    };
  }

  /**
   * A usable sandbox for the request, counted as active before anything else can run (an idle isolate evicted from
   * the cache is disposed at once, so one in use must never look idle), or the code's compile failure.
   */
  private async claim(request: InvocationRequest, memoryMb: number): Promise<CompiledSandbox | InvocationFailure> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const acquired = await this.acquire(request, memoryMb);
      if ('kind' in acquired) return acquired;
      if (acquired.usable) {
        acquired.active++;
        return acquired;
      }
      // Evicted between compiling and now: look again (a new isolate is built if need be).
    }
    throw new Error('the sandbox cache is too small for this many different codes at once (runtime cache size)');
  }

  private async acquire(request: InvocationRequest, memoryMb: number): Promise<CompiledSandbox | InvocationFailure> {
    const key = `${request.tenantId}\u0000${request.codeHash}\u0000${memoryMb}`;
    const cached = this.cache.get(key);
    if (cached?.usable) {
      this.options.metrics?.observeCompileCache('hit');
      return cached;
    }
    if (cached) this.evict(cached);
    const failure = this.broken.get(key);
    if (failure) {
      this.options.metrics?.observeCompileCache('hit');
      return failure;
    }
    const inFlight = this.compiling.get(key);
    if (inFlight) {
      this.options.metrics?.observeCompileCache('hit');
      return inFlight;
    }
    if (request.code === undefined) throw new CodeRequired();
    if (createHash('sha256').update(request.code).digest('hex') !== request.codeHash.toLowerCase()) {
      throw new InvalidInvocation('codeHash is not the SHA-256 of code');
    }
    this.options.metrics?.observeCompileCache('miss');
    const compilation = this.compile(key, request.code, memoryMb).finally(() => this.compiling.delete(key));
    this.compiling.set(key, compilation);
    return compilation;
  }

  private newIsolate(memoryMb: number): ivm.Isolate {
    return new ivm.Isolate({
      memoryLimit: memoryMb,
      onCatastrophicError: (message) => {
        this.options.logger?.fatal({ message }, 'isolated-vm lost control of an isolate');
        this.options.onCatastrophicError?.(message);
      },
    });
  }

  /**
   * An isolate with the prelude compiled for new code of this heap size: the spare when it fits (then another is
   * prepared once this compilation is done), else a new one. The spare has run nothing and belongs to no tenant until
   * it is taken, so it is as fresh as a new isolate; it saves a new reactor's first call the isolate's creation and
   * the prelude's compilation.
   */
  private async preparedIsolate(memoryMb: number): Promise<Prepared> {
    const spare = this.spare;
    this.spare = undefined;
    if (spare?.memoryMb === memoryMb) {
      const prepared = await spare.ready.catch(() => undefined);
      if (prepared && !prepared.isolate.isDisposed) return prepared;
    } else if (spare) {
      void spare.ready.then(({ isolate }) => isolate.dispose()).catch(() => undefined);
    }
    const isolate = this.newIsolate(memoryMb);
    try {
      return { isolate, prelude: await this.compilePrelude(isolate) };
    } catch (error) {
      if (!isolate.isDisposed) isolate.dispose();
      throw error;
    }
  }

  /**
   * Prepares the next spare once the pool has had no invocation for SPARE_QUIET_MS, or after SPARE_MAX_WAIT_MS under
   * steady load. Prepared at once, its ~2 ms of isolate work (isolate, prelude, context) would compete for the CPU
   * with the call that took the last spare (a new reactor's first call) and the calls right after it.
   */
  private wantSpare(memoryMb: number): void {
    if (this.closed || this.spare !== undefined) return;
    const wanted = this.spareWanted;
    if (wanted) {
      wanted.memoryMb = memoryMb;
      return;
    }
    const check = () => {
      const current = this.spareWanted;
      if (current === undefined) return; // the pool closed
      const now = performance.now();
      const quiet = this.running === 0 && now - this.lastActivity >= SPARE_QUIET_MS;
      if (!quiet && now - current.since < SPARE_MAX_WAIT_MS) {
        current.timer = setTimeout(check, SPARE_QUIET_MS).unref();
        return;
      }
      this.spareWanted = undefined;
      this.prepareSpare(current.memoryMb);
    };
    this.spareWanted = { memoryMb, since: performance.now(), timer: setTimeout(check, SPARE_QUIET_MS).unref() };
  }

  private prepareSpare(memoryMb: number): void {
    if (this.closed || this.spare !== undefined) return;
    const spare: Spare = {
      memoryMb,
      ready: Promise.resolve().then(async () => {
        if (this.closed) throw new Error('the sandbox pool is closed');
        const isolate = this.newIsolate(memoryMb);
        let prelude: ivm.Script;
        try {
          prelude = await this.compilePrelude(isolate);
        } catch (error) {
          if (!isolate.isDisposed) isolate.dispose();
          throw error;
        }
        // A context with the prelude run in it as well (~1 ms of a new reactor's first call). Its host functions
        // reach the invocation that takes it, as for any context (SandboxContext); until then, none. Should this
        // fail, the first invocation creates its context itself.
        const context = await this.preparedContext(isolate, prelude).catch(() => undefined);
        return { isolate, prelude, context };
      }),
    };
    spare.ready.catch(() => {
      if (this.spare === spare) this.spare = undefined;
    });
    this.spare = spare;
  }

  /** A new context of `isolate` with the prelude run in it; nothing else has run there. */
  private async preparedContext(isolate: ivm.Isolate, prelude: ivm.Script): Promise<SandboxContext> {
    const prepared = new SandboxContext(await isolate.createContext());
    try {
      prepared.entry = await prelude.run(prepared.context, {
        reference: true,
        timeout: this.options.limits.cpuMs,
      });
      return prepared;
    } catch (error) {
      prepared.release();
      throw error;
    }
  }

  private async compile(key: string, code: string, memoryMb: number): Promise<CompiledSandbox | InvocationFailure> {
    const { isolate, prelude, context } = await this.preparedIsolate(memoryMb);
    this.wantSpare(memoryMb);
    let script: ivm.Script;
    try {
      script = await isolate.compileScript(wrapReactorCode(code), { filename: 'reactor.js', lineOffset: -1 });
    } catch (error) {
      if (!isolate.isDisposed) isolate.dispose();
      const failure = compileFailure(syntaxMessage(error));
      this.broken.set(key, failure);
      return failure;
    }
    const sandbox = new CompiledSandbox(key, isolate, prelude, script, memoryMb, context);
    this.live.add(sandbox);
    this.options.metrics?.isolates.set(this.live.size);
    if (this.closed) {
      this.retire(sandbox);
      throw new Error('the sandbox pool is closed');
    }
    this.makeRoom(key);
    this.cache.set(key, sandbox);
    return sandbox;
  }

  /**
   * Before a new isolate goes into a full cache: a tenant that holds half of the cache already gives up its own least
   * recently used isolate, not another tenant's. Without this, one tenant calling more distinct codes than the cache
   * holds (a tenant may have 1,000 reactors, the cache holds 500) evicted every other tenant's isolates, and each of
   * their next calls paid the compile again (a trivial reactor: 60 ms instead of 6). With a single tenant the cache
   * is still all its own (its least recently used isolate is the cache's).
   */
  private makeRoom(key: string): void {
    if (this.cache.size < this.cache.max) return;
    const tenant = key.slice(0, key.indexOf('\u0000') + 1);
    let held = 0;
    let oldest: string | undefined;
    for (const cached of this.cache.rkeys()) {
      if (!cached.startsWith(tenant)) continue;
      held++;
      oldest ??= cached;
    }
    if (oldest !== undefined && held * 2 >= this.cache.max) this.cache.delete(oldest);
  }

  /**
   * The prelude compiled into a new isolate. The first compilation in this process produces V8's code cache for it,
   * and every later one starts from that cache: parsing the ~80 kB bundle is most of a new reactor's first call
   * (measured: 6-20 ms without the cache, 0.2-2 ms with it, on the 2-CPU benchmark machine). The cache is V8's own
   * (bound to this V8 build and flags, checked by V8); a rejected one is produced afresh.
   */
  private async compilePrelude(isolate: ivm.Isolate): Promise<ivm.Script> {
    const cachedData = this.preludeCache;
    if (cachedData === undefined) {
      const script: CachingScript = await isolate.compileScript(PRELUDE_SOURCE, {
        filename: 'tokenvault:prelude',
        produceCachedData: true,
      });
      this.preludeCache ??= script.cachedData;
      return script;
    }
    const script: CachingScript = await isolate.compileScript(PRELUDE_SOURCE, {
      filename: 'tokenvault:prelude',
      cachedData,
    });
    if (script.cachedDataRejected === true && this.preludeCache === cachedData) {
      this.preludeCache = undefined; // the next new isolate produces it again
    }
    return script;
  }

  /** Drops an entry whose isolate died (the cache's dispose callback retires it). */
  private evict(sandbox: CompiledSandbox): void {
    if (this.cache.peek(sandbox.key) === sandbox) this.cache.delete(sandbox.key);
    else this.retire(sandbox);
  }

  private retire(sandbox: CompiledSandbox): void {
    sandbox.retired = true;
    this.release(sandbox);
  }

  private release(sandbox: CompiledSandbox, force = false): void {
    if (sandbox.active > 0 && !force && !sandbox.isolate.isDisposed) return;
    if (!sandbox.isolate.isDisposed) sandbox.isolate.dispose();
    if (this.live.delete(sandbox)) this.options.metrics?.isolates.set(this.live.size);
  }

  /** One invocation, in a warm context of the same reactor or a fresh one; a suspect's tasks go through `lane`. */
  private async run(
    sandbox: CompiledSandbox,
    request: InvocationRequest,
    limits: InvocationLimits,
    started: number,
    lane?: Lane,
  ): Promise<Envelope> {
    const { isolate } = sandbox;
    const budgetNs = BigInt(limits.cpuMs) * 1_000_000n;
    // Made on the first fetch or bt call: aborting one builds a DOMException, measurable per invocation.
    let abort: AbortController | undefined;
    const signal = () => (abort ??= new AbortController()).signal;
    const hostTimers = new Set<NodeJS.Timeout>();
    const reuseKey =
      request.contextKey === undefined
        ? undefined
        : `${request.contextKey}\u0000${JSON.stringify(request.configuration ?? {})}`;
    let context: SandboxContext | undefined;
    let entry: ivm.Reference | undefined;
    /** Host operations started and not yet answered: a context with any left is not reused. */
    let outstanding = 0;
    let finished = false;
    let answer!: (envelope: Envelope) => void;
    const outcome = new Promise<Envelope>((resolve) => (answer = resolve));

    const complete = (envelope: Envelope) => {
      if (finished) return;
      finished = true;
      answer(envelope);
    };
    const fail = (error: unknown) => complete({ ok: false, error: this.classify(sandbox, error, limits) });

    // CPU accounting. The isolate's CPU clock counts every invocation sharing the isolate, so this invocation is
    // charged only while one of its own tasks (the module, the call, an answer to a host operation and the
    // continuations it runs) is queued or running — never while it waits for the network or a timer.
    let charged = 0n;
    let tasks = 0;
    let since = 0n;
    const cpuNow = () => (isolate.isDisposed ? since : isolate.cpuTime);
    const cpuUsed = () => charged + (tasks > 0 ? cpuNow() - since : 0n);
    /** What is left of the CPU budget, in whole ms (at least 1: isolated-vm reads 0 as "no limit"). */
    const cpuLeft = () => {
      const left = budgetNs - cpuUsed();
      return left <= 0n ? ENOUGH : Math.max(ENOUGH, Math.ceil(Number(left) / 1e6));
    };
    /** Resolves the wait for this invocation's last task (see `quiet`). */
    let drained: (() => void) | undefined;
    const task = <T>(promise: Promise<T>): Promise<T> => {
      void sandbox.track(promise); // tracked for the pool's shutdown; the caller awaits the promise itself
      if (tasks++ === 0) since = cpuNow();
      const done = () => {
        if (--tasks > 0) return;
        charged += cpuNow() - since;
        drained?.();
      };
      // The caller handles the promise's outcome; this only counts when it settles.
      void promise.then(done, done);
      return promise;
    };
    const wallLeftNow = () => limits.timeoutMs - (performance.now() - started);
    /** Starts a task in the isolate; a suspect's waits for the lane, and keeps it closed as long as it computed. */
    const issue = <T>(start: () => Promise<T>): Promise<T> => {
      if (lane === undefined) return task(start());
      return lane.enter(wallLeftNow()).then((admitted) => {
        if (!admitted || finished) {
          if (admitted) lane.leave();
          throw new LaneTimeout();
        }
        const before = cpuUsed();
        const promise = task(start());
        const leave = () => lane.leave(Math.min(Number(cpuUsed() - before) / 1e6, limits.cpuMs));
        promise.then(leave, leave);
        return promise;
      });
    };

    const settle = (id: number, ok: boolean, json: string, bytes?: Buffer) => {
      outstanding--;
      if (finished || entry === undefined) return;
      const args: unknown[] = ['settle', id, ok, json];
      if (bytes !== undefined) args.push(new ivm.ExternalCopy(bytes).copyInto({ release: true }));
      const target = entry;
      issue(() => target.apply(undefined, args, { timeout: cpuLeft() })).catch(fail);
    };
    const maxResultBytes = this.options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    const maxHostBytes = this.options.maxHostBytes ?? DEFAULT_MAX_HOST_BYTES;
    /** Bytes the code passed to the host so far (the prelude counts the same before copying; this is the backstop). */
    let hostBytes = 0;
    const overHostLimit = (json: unknown, extra: unknown): boolean => {
      hostBytes += sizeOf(json) + sizeOf(extra);
      if (hostBytes <= maxHostBytes) return false;
      complete({ ok: false, error: hostLimitFailure(maxHostBytes) });
      return true;
    };
    const hostCall = (id: number, op: string, json: string, body: unknown) => {
      if (finished) return;
      if (op === 'done') {
        if (typeof json === 'string' && Buffer.byteLength(json) > maxResultBytes)
          return complete({ ok: false, error: resultTooLargeFailure(maxResultBytes) });
        return complete(readEnvelope(json, maxResultBytes));
      }
      if (op === 'limit') return complete({ ok: false, error: hostLimitFailure(maxHostBytes) });
      if (overHostLimit(json, body)) return;
      outstanding++;
      let payload: Record<string, unknown>;
      try {
        payload = JSON.parse(json) as Record<string, unknown>;
      } catch {
        return settle(id, false, 'the host could not read the request');
      }
      switch (op) {
        case 'sleep': {
          const ms = Math.min(Math.max(0, Number(payload.ms) || 0), limits.timeoutMs);
          const timer = setTimeout(() => {
            hostTimers.delete(timer);
            settle(id, true, 'null');
          }, ms);
          hostTimers.add(timer);
          return;
        }
        case 'fetch':
          this.fetch(payload, body, signal()).then(
            (response) => settle(id, true, response.json, response.body),
            (error: Error) => settle(id, false, error?.message || 'the request failed'),
          );
          return;
        case 'bt': {
          if (request.bt === null || request.bt === undefined)
            return settle(id, false, 'this reactor has no application, so it has no bt client');
          if (!this.options.bt)
            return settle(
              id,
              true,
              JSON.stringify({ status: -1, data: null, message: 'bt is not available in this worker' }),
            );
          this.options.bt.call(request.bt.apiKey, payload as unknown as BtCall, signal()).then(
            (result) => settle(id, true, JSON.stringify(result)),
            (error: Error) =>
              settle(
                id,
                true,
                JSON.stringify({
                  status: -1,
                  data: null,
                  message: error?.message || 'the request to the vault failed',
                }),
              ),
          );
          return;
        }
        default:
          return settle(id, false, `unknown host operation ${JSON.stringify(op)}`);
      }
    };
    const hostSync = (op: string, json: string, parts: unknown): string => {
      if (overHostLimit(json, parts)) throw new Error(hostLimitFailure(maxHostBytes).detail);
      const payload = JSON.parse(json) as Record<string, unknown> | null;
      switch (op) {
        case 'uuid':
          return randomUUID();
        case 'keyMatches': {
          const candidate = Buffer.from(typeof payload?.key === 'string' ? payload.key : '');
          const own = Buffer.from(request.bt?.apiKey ?? '');
          return String(own.length > 0 && candidate.length === own.length && timingSafeEqual(candidate, own));
        }
        case 'hash':
          return digest(payload ?? {}, parts);
        default:
          throw new Error(`unknown host operation ${JSON.stringify(op)}`);
      }
    };

    const wallTimer = setTimeout(
      () => complete({ ok: false, error: timeoutFailure('wall', limits.timeoutMs) }),
      Math.max(0, wallLeftNow()),
    );
    const hooks: InvocationHooks = { call: hostCall, sync: hostSync };
    const startArgs = () => [
      'start',
      JSON.stringify({ args: request.args ?? null, configuration: request.configuration ?? {} }),
      request.bt !== null && request.bt !== undefined,
      request.kind,
      JSON.stringify({ host: maxHostBytes, result: maxResultBytes }),
    ];
    /**
     * A warm start on the worker's thread (isolated-vm's applySync): for a reactor whose warm starts have been quick,
     * this saves the two thread hops of an asynchronous call (~25 µs of CPU per invocation, measured). The thread is
     * held for at most SYNC_SLICE_MS: a start that runs longer is stopped, its context dropped with whatever it had
     * asked of the host (nothing of it ran: host operations are queued behind this call), and false tells the caller
     * to run the invocation again the usual way, in a fresh context; the reactor does not start synchronously again.
     */
    const startSync = (warm: SandboxContext): boolean => {
      const timeout = Math.min(cpuLeft(), SYNC_SLICE_MS);
      const before = cpuNow();
      try {
        warm.entry!.applySync(undefined, startArgs(), { timeout });
        this.options.metrics?.observeWarmStart('synchronous');
        return true;
      } catch (error) {
        const sliced =
          timeout === SYNC_SLICE_MS &&
          !sandbox.isolate.isDisposed &&
          /timed out/i.test(String((error as Error)?.message));
        if (!sliced) throw error;
        sandbox.quickStarts = -1;
        this.options.metrics?.observeWarmStart('overran');
        warm.release();
        context = undefined;
        entry = undefined;
        return false;
      } finally {
        const spent = sandbox.isolate.isDisposed ? 0n : cpuNow() - before;
        charged += spent;
        sandbox.noteStart(spent);
      }
    };
    const main = async () => {
      let warm = reuseKey === undefined ? undefined : sandbox.take(reuseKey);
      if (warm && lane === undefined && sandbox.startsSync) {
        context = warm;
        warm.hooks = hooks;
        entry = warm.entry!;
        if (startSync(warm)) return;
        warm = undefined;
      }
      const prepared = warm ? undefined : sandbox.takePrepared();
      if (warm) {
        context = warm;
        warm.hooks = hooks;
        entry = warm.entry!;
      } else if (prepared) {
        // The code's first invocation: the context prepared with its isolate (the prelude has run, nothing else).
        context = prepared;
        prepared.hooks = hooks;
        entry = prepared.entry!;
        await issue(() => sandbox.script.run(prepared.context, { timeout: limits.cpuMs }));
        if (finished) return;
      } else {
        const created = await sandbox.track(isolate.createContext());
        // Once the invocation has been answered, whatever arrives late is released here, not in the cleanup below.
        if (finished) return created.release();
        const fresh = new SandboxContext(created);
        context = fresh;
        fresh.hooks = hooks;
        // Queued back to back: the prelude takes the host functions off the global object before the module runs.
        const preludeRun = sandbox.track(sandbox.prelude.run(created, { reference: true, timeout: limits.cpuMs }));
        const moduleRun = issue(() => sandbox.script.run(created, { timeout: limits.cpuMs }));
        moduleRun.catch(() => undefined);
        const reference = await preludeRun;
        fresh.entry = reference;
        if (finished) return;
        entry = reference;
        await moduleRun;
        if (finished) return;
      }
      // Runs the module and the call up to their first wait; the answer arrives as the host operation 'done'.
      const before = cpuUsed();
      await issue(() => entry!.apply(undefined, startArgs(), { timeout: cpuLeft() }));
      if (warm) {
        sandbox.noteStart(cpuUsed() - before);
        this.options.metrics?.observeWarmStart('asynchronous');
      }
    };
    const running = main();
    running.catch(fail);
    /**
     * Once answered: the first call has returned and every task of this invocation has finished (the answer, 'done',
     * arrives from inside the last task, which still has to return). Nothing of this invocation runs in its context
     * afterwards, and the isolate is left idle for the next (possibly synchronous) start.
     */
    const quiet = outcome
      .then(() => running)
      .then(() => (tasks === 0 ? undefined : new Promise<void>((resolve) => (drained = resolve))));
    quiet.catch(() => undefined); // a failed start is answered through `fail`

    let envelope: Envelope | undefined;
    try {
      envelope = await outcome;
      // The call into the isolate returns right after the answer; waiting for it parks the context before the caller's
      // next invocation can arrive. Code that computes on after answering delays only its own answer, within the wall
      // clock (and its CPU budget ends the call anyway).
      if (envelope.ok && reuseKey !== undefined) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          quiet.catch(() => undefined),
          new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, wallLeftNow())))),
        ]);
        clearTimeout(timer);
      }
      return envelope;
    } finally {
      clearTimeout(wallTimer);
      for (const timer of hostTimers) clearTimeout(timer);
      abort?.abort();
      const used = context;
      if (used) {
        used.hooks = undefined;
        // Kept only after a success with nothing left running, and once its calls into the isolate have returned.
        const reusable =
          reuseKey !== undefined && envelope?.ok === true && outstanding === 0 && ++used.uses < WARM_MAX_USES;
        quiet.then(
          () =>
            reusable && outstanding === 0 && tasks === 0 && used.entry !== undefined && sandbox.usable
              ? sandbox.park(reuseKey, used)
              : used.release(),
          () => used.release(),
        );
      }
    }
  }

  private classify(sandbox: CompiledSandbox, error: unknown, limits: InvocationLimits): InvocationFailure {
    if (error instanceof LaneTimeout) return timeoutFailure('wall', limits.timeoutMs);
    const message = error instanceof Error ? error.message : String(error);
    if (sandbox.isolate.isDisposed) {
      // The pool disposes only idle isolates (or all of them when it closes); anything else is isolated-vm enforcing
      // the heap limit, which also ends the other invocations sharing the isolate.
      if (/memory limit/i.test(message) || !this.closed) sandbox.outOfMemory = true;
      this.evict(sandbox);
      if (sandbox.outOfMemory) return memoryFailure(limits.memoryMb);
      return thrownFailure('the sandbox was stopped while the code ran');
    }
    if (/timed out/i.test(message)) return timeoutFailure('cpu', limits.cpuMs);
    this.options.logger?.warn({ error_name: (error as Error)?.name }, 'sandbox call failed');
    return thrownFailure('the sandbox failed while the code ran');
  }

  private async fetch(
    payload: Record<string, unknown>,
    body: unknown,
    signal: AbortSignal,
  ): Promise<{ json: string; body: Buffer }> {
    const url = typeof payload.url === 'string' ? payload.url : '';
    const method = (typeof payload.method === 'string' ? payload.method : 'GET').toUpperCase();
    const headers: Record<string, string> = {};
    if (payload.headers !== null && typeof payload.headers === 'object') {
      for (const [name, value] of Object.entries(payload.headers as Record<string, unknown>)) {
        if (typeof value === 'string') headers[name] = value;
      }
    }
    let bytes: Buffer | undefined;
    if (typeof body === 'string') bytes = Buffer.from(body, 'utf8');
    else if (body instanceof ArrayBuffer) bytes = Buffer.from(body);
    else if (ArrayBuffer.isView(body)) bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const response = await this.outbound({ url, method, headers, body: bytes, signal });
    if (response.body.length > MAX_OUTBOUND_RESPONSE_BYTES) {
      throw new Error(`the response is larger than ${MAX_OUTBOUND_RESPONSE_BYTES} bytes`);
    }
    const responseHeaders: Record<string, string[]> = {};
    for (const [name, value] of Object.entries(response.headers)) {
      if (value === undefined) continue;
      responseHeaders[name.toLowerCase()] = Array.isArray(value) ? value.map(String) : [String(value)];
    }
    const meta = {
      status: response.status,
      statusText: STATUS_CODES[response.status] ?? '',
      headers: responseHeaders,
      url,
    };
    return { json: JSON.stringify(meta), body: response.body };
  }
}

/** A suspect's task could not get into the lane before the invocation's wall clock ran out. */
class LaneTimeout extends Error {}

/** A counting semaphore with a FIFO queue; `enter` gives up after `waitMs`; `leave` may hold the slot a while longer. */
class Lane {
  private running = 0;
  private readonly waiting: Array<(admitted: boolean) => void> = [];

  constructor(private readonly size: number) {}

  enter(waitMs: number): Promise<boolean> {
    if (this.running < this.size) {
      this.running++;
      return Promise.resolve(true);
    }
    if (waitMs <= 0) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const admit = (admitted: boolean) => {
        clearTimeout(timer);
        resolve(admitted);
      };
      const timer = setTimeout(() => {
        const index = this.waiting.indexOf(admit);
        if (index >= 0) this.waiting.splice(index, 1);
        resolve(false);
      }, waitMs);
      this.waiting.push(admit);
    });
  }

  leave(holdMs = 0): void {
    if (holdMs >= 1) {
      setTimeout(() => this.leave(), holdMs).unref();
      return;
    }
    const next = this.waiting.shift();
    if (next) next(true);
    else this.running--;
  }
}

function syntaxMessage(error: unknown): string {
  const e = error as Error;
  const text = e instanceof Error ? `${e.name === 'Error' ? '' : `${e.name}: `}${e.message}` : String(error);
  return text.length > 2000 ? `${text.slice(0, 2000)}...` : text;
}

/** What a value copied out of the isolate weighs: a string its length, bytes their length, an array the sum. */
function sizeOf(value: unknown): number {
  if (typeof value === 'string') return value.length;
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return value.byteLength;
  if (Array.isArray(value)) return value.reduce((n: number, item) => n + sizeOf(item), 0);
  return 0;
}

/**
 * createHash / createHmac for the sandbox: parts are strings (UTF-8) or bytes; an HMAC's key is the first part. Exported
 * for the crypto shim's differential test (test/unit/sandbox-shims.test.ts).
 */
export function digest(payload: Record<string, unknown>, parts: unknown): string {
  const alg = String(payload.alg);
  const encoding = String(payload.encoding);
  if (!HASHES.has(alg)) throw new Error(`Digest method not supported: ${alg}`);
  const list = Array.isArray(parts) ? parts : [];
  const asInput = (part: unknown): string | Buffer => {
    if (typeof part === 'string') return part;
    if (ArrayBuffer.isView(part)) return Buffer.from(part.buffer, part.byteOffset, part.byteLength);
    if (part instanceof ArrayBuffer) return Buffer.from(part);
    return String(part);
  };
  let hash;
  let rest = list;
  if (payload.kind === 'hmac') {
    hash = createHmac(alg, asInput(list[0]));
    rest = list.slice(1);
  } else {
    hash = createHash(alg);
  }
  for (const part of rest) hash.update(asInput(part));
  const result = hash.digest();
  if (encoding === 'bytes') return JSON.stringify([...result]);
  if (!DIGEST_ENCODINGS.has(encoding)) throw new Error(`unsupported digest encoding ${encoding}`);
  return result.toString(encoding as BufferEncoding);
}
