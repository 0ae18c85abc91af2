// How the API reaches workers: POST /invoke over a keep-alive undici Pool. An invocation runs code with side effects
// (bt writes, outbound calls), so it is retried only when it certainly never reached a worker: the connection failed
// before a byte of the request was written. Once written, a failure is final. A worker that cannot be reached, or
// that does not answer within the invocation's time limit plus a margin, is Errors.RuntimeUnavailable (503).
//
// Invocations started in the same turn of the event loop (concurrent requests under load) travel as one batch, whose
// answers come back line by line as each finishes: one HTTP exchange instead of several costs the API ~20% less CPU
// per react at 32 clients (measured A/B). A lone invocation, or a large one, goes by itself as before; a worker that
// refuses batches (an older version, 400) gets the batch's invocations one by one.
import { StringDecoder } from 'node:string_decoder';
import { LRUCache } from 'lru-cache';
import { Pool, type Dispatcher } from 'undici';
import { TurnBatches } from '../../batching/turn-batches.js';
import type { Config } from '../../config/config.js';
import { Errors, VaultError } from '../../errors/registry.js';
import { MAX_BATCH_ITEMS, type BatchLine, type InvocationRequest, type InvocationResult } from '../contract.js';
import { ResultBudget, type ResultLease } from './result-budget.js';

export interface RuntimeClientOptions {
  /** Base URL of the worker pool (a Service in Kubernetes), or of the dev worker. */
  workerUrl: string;
  /** Wall-clock limit of invocations that set none (config.runtime.timeoutMs). */
  defaultTimeoutMs: number;
  /** Keep-alive connections to the workers. */
  connections?: number;
  /** Added to an invocation's time limit for the worker's answer to arrive. */
  marginMs?: number;
  /** Replaces the connection pool (tests). */
  dispatcher?: Dispatcher;
  /**
   * Largest result (JSON) of one invocation (config.sizeLimits.maxResultBytes). Workers refuse larger results
   * themselves; this bounds what the API buffers from a worker that does not (an older or misconfigured one).
   */
  maxResultBytes?: number;
  /** Sent in X-TokenVault-Worker-Secret with every invocation (config.workerSecret). */
  secret?: string;
  /**
   * Bytes of results this process holds at once, shared by every client of the process (result-budget.ts); without
   * it results are not counted (tests of the client).
   */
  budget?: ResultBudget;
}

/** How the caller keeps a result's bytes counted past the invocation (result-budget.ts). */
export interface InvokeOptions {
  /**
   * Given the release of the result's reservation once the invocation succeeded: the caller calls it when its answer
   * is sent. Without it the reservation ends as the invocation settles.
   */
  hold?: (release: () => void) => void;
}

/** One budget per process (per config object): the shared pool's client and every dedicated one count together. */
const budgets = new WeakMap<Config, ResultBudget>();

interface Answer {
  status: number;
  body: string;
  /** The answer's bytes, counted as they arrived. */
  lease?: ResultLease;
}

/** One invocation's request body, and how to send it again with its code when the worker asks for it. */
interface Outgoing {
  body: string;
  timeoutMs: number;
  /** Set when `body` leaves the code out: the body with it (for a worker answering 409). */
  withCode?: () => string;
  /** Remembered in `codeSent` once a worker has answered an invocation that carried the code. */
  codeKey: string;
  tenantId: string;
  hold?: (release: () => void) => void;
}

/** An invocation waiting for its turn's batch. */
interface Queued extends Outgoing {
  // Function-typed properties (not methods): they are passed on unbound, as a promise's settle callbacks.
  resolve: (result: InvocationResult) => void;
  reject: (error: unknown) => void;
}

interface Batch {
  items: Queued[];
  chars: number;
}

/** What one POST /invoke reports as it goes. */
interface Exchange {
  onData(status: number, chunk: Buffer): void;
  onComplete(status: number): void;
  onError(error: Error, sent: boolean): void;
}

/** Invocations larger than this (JSON characters) go alone, and a batch stops growing at it. */
const BATCH_CHARS = 256 * 1024;
/** Room for the answer's envelope (status, failure details) around a result of the largest allowed size. */
const ANSWER_OVERHEAD_BYTES = 64 * 1024;

/** A worker's answer grew past the result limit: the exchange is aborted, nothing more of it is buffered. */
class AnswerTooLarge extends Error {}

class SendError extends Error {
  constructor(
    readonly cause: Error,
    readonly sent: boolean,
  ) {
    super(cause.message);
  }
}

export class RuntimeClient {
  private readonly pool: Dispatcher;
  private readonly defaultTimeoutMs: number;
  private readonly marginMs: number;
  /** Largest answer buffered from a worker for one invocation (the result limit plus room for the envelope). */
  private readonly maxAnswerBytes: number;
  private readonly maxResultBytes: number;
  private readonly secretHeader: Record<string, string>;
  private readonly budget?: ResultBudget;
  /** Invocations started in this turn (see `invoke`). */
  private readonly batches = new TurnBatches<Batch>(
    () => ({ items: [], chars: 0 }),
    (batch) => this.send(batch.items),
  );
  /**
   * Code (by tenant and code hash) a worker of this pool has received: later invocations leave it out, since a
   * formula may be 50,000 characters (measured: a 45 kB formula halved react throughput when sent every time). A
   * worker that does not have it (another replica, or evicted) answers 409 and gets it in a second request.
   */
  private readonly codeSent = new LRUCache<string, true>({ max: 10_000 });

  constructor(options: RuntimeClientOptions) {
    this.defaultTimeoutMs = options.defaultTimeoutMs;
    this.marginMs = options.marginMs ?? 5000;
    this.maxResultBytes = options.maxResultBytes ?? 4 * 1024 * 1024;
    this.maxAnswerBytes = this.maxResultBytes + ANSWER_OVERHEAD_BYTES;
    this.secretHeader = options.secret === undefined ? {} : { 'x-tokenvault-worker-secret': options.secret };
    this.budget = options.budget;
    const timeout = options.defaultTimeoutMs + this.marginMs;
    this.pool =
      options.dispatcher ??
      new Pool(new URL(options.workerUrl).origin, {
        connections: options.connections ?? 32,
        pipelining: 1,
        keepAliveTimeout: 30_000,
        headersTimeout: timeout,
        bodyTimeout: timeout,
        connectTimeout: 5000,
      });
  }

  static fromConfig(config: Config, workerUrl = config.workerUrl): RuntimeClient {
    if (!workerUrl) throw new Error('no worker URL: set TOKENVAULT_WORKER_URL (dev starts its own worker)');
    let budget = budgets.get(config);
    if (!budget) {
      budget = new ResultBudget(config.sizeLimits.resultBytesInFlight, config.sizeLimits.resultBytesInFlightPerTenant);
      budgets.set(config, budget);
    }
    return new RuntimeClient({
      budget,
      workerUrl,
      defaultTimeoutMs: config.runtime.timeoutMs,
      maxResultBytes: config.sizeLimits.maxResultBytes,
      connections: config.runtime.connections,
      secret: config.workerSecret,
    });
  }

  invoke(request: InvocationRequest, options: InvokeOptions = {}): Promise<InvocationResult> {
    const timeoutMs = (request.limits?.timeoutMs ?? this.defaultTimeoutMs) + this.marginMs;
    const codeKey = `${request.tenantId}\u0000${request.codeHash}`;
    const { tenantId } = request;
    const { hold } = options;
    const outgoing: Outgoing =
      request.code !== undefined && this.codeSent.has(codeKey)
        ? {
            body: JSON.stringify({ ...request, code: undefined }),
            withCode: () => JSON.stringify(request),
            timeoutMs,
            codeKey,
            tenantId,
            hold,
          }
        : { body: JSON.stringify(request), timeoutMs, codeKey, tenantId, hold };
    const { body } = outgoing;
    if (body.length > BATCH_CHARS) return this.invokeOne(outgoing);
    return new Promise((resolve, reject) => {
      const batch = this.batches.current(
        (open) => open.items.length < MAX_BATCH_ITEMS && open.chars + body.length <= BATCH_CHARS,
      );
      batch.items.push({ ...outgoing, resolve, reject });
      batch.chars += body.length;
    });
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  /** The invocations started together: one POST of their own, or a batch. */
  private send(items: Queued[]): void {
    if (items.length === 1) {
      const [item] = items;
      this.invokeOne(item).then(item.resolve, item.reject);
      return;
    }
    this.postBatch(items);
  }

  /** One invocation on its own; sent again with its code when the worker asks for it. */
  private async invokeOne(outgoing: Outgoing): Promise<InvocationResult> {
    const answer = await this.exchange(outgoing);
    const { lease } = answer;
    try {
      // 409: the worker does not have the code (400 from a worker that predates leaving it out); nothing ran.
      if ((answer.status === 409 || answer.status === 400) && outgoing.withCode) {
        lease?.release();
        return await this.invokeOne(carryingCode(outgoing));
      }
      if (answer.status === 200) {
        this.codeSent.set(outgoing.codeKey, true);
        const result = asResult(parseOrUndefined(answer.body));
        if (lease && outgoing.hold) outgoing.hold(() => lease.release());
        else lease?.release();
        return result;
      }
      throw refusal(answer.status);
    } catch (error) {
      lease?.release();
      throw error;
    }
  }

  /** One POST /invoke and its answer, retried once when nothing of it was written. */
  private async exchange(outgoing: Outgoing): Promise<Answer> {
    let answer: Answer;
    try {
      answer = await this.post(outgoing);
    } catch (error) {
      // Retried once, and only when no byte of the request was written (refused, reset or timed-out connection).
      if (!(error instanceof SendError) || error.sent) throw unavailable(error);
      try {
        answer = await this.post(outgoing);
      } catch (second) {
        throw unavailable(second);
      }
    }
    return answer;
  }

  /**
   * One POST /invoke of several invocations; each is settled by its own answer line as it arrives. When nothing was
   * written, or the worker refuses batches (400), each is sent again on its own; once written, an invocation without
   * an answer line has failed.
   */
  private postBatch(items: Queued[]): void {
    const answered = new Array<boolean>(items.length).fill(false);
    // Each line's bytes are counted to its invocation's tenant as they arrive (the line's index leads it).
    const leases = items.map((item) => this.budget?.lease(item.tenantId));
    const settle = (i: number, outcome: () => InvocationResult) => {
      if (answered[i]) return;
      answered[i] = true;
      const lease = leases[i];
      try {
        const result = outcome();
        const { hold } = items[i];
        if (lease && hold) hold(() => lease.release());
        else lease?.release();
        items[i].resolve(result);
      } catch (error) {
        lease?.release();
        items[i].reject(error);
      }
    };
    // Bytes are counted before they are decoded, and a refused line's rest is dropped as it comes, undecoded: a
    // refusal then costs no more than what was already counted.
    const decoder = new StringDecoder('utf8');
    /** The current line: its text so far, its invocation once its lead is read, bytes not yet counted to it. */
    let pending = '';
    /** The bytes `pending` was decoded from: the limit is in bytes, its length in UTF-16 units. */
    let pendingBytes = 0;
    let current = -1;
    let uncounted = 0;
    let skipping = false;
    const charge = (bytes: number): boolean => {
      uncounted += bytes;
      if (current < 0) return true;
      const lease = current < items.length && !answered[current] ? leases[current] : undefined;
      try {
        lease?.grow(uncounted);
        uncounted = 0;
        return true;
      } catch (error) {
        // Over the budget: this invocation is answered with the refusal and the rest of its line is not kept.
        settle(current, () => thrown(error));
        skipping = true;
        pending = '';
        pendingBytes = 0;
        return false;
      }
    };
    const piece = (bytes: Buffer, complete: boolean) => {
      if (!skipping) {
        if (current >= 0) {
          if (charge(bytes.length)) {
            pending += decoder.write(bytes);
            pendingBytes += bytes.length;
          }
        } else {
          pending += decoder.write(bytes);
          pendingBytes += bytes.length;
          const lead = /^\{"i":(\d+)[,}]/.exec(pending);
          if (lead) current = Number(lead[1]);
          charge(bytes.length);
        }
      }
      if (complete) {
        const text = pending + decoder.end();
        if (!skipping) line(text);
        pending = '';
        pendingBytes = 0;
        current = -1;
        uncounted = 0;
        skipping = false;
      } else if (pendingBytes > this.maxAnswerBytes) throw new AnswerTooLarge();
    };
    const unanswered = () => items.filter((_, i) => !answered[i]);
    const line = (text: string) => {
      const parsed = parseOrUndefined(text) as Partial<BatchLine> | undefined;
      const i = parsed?.i;
      if (typeof i !== 'number' || !Number.isInteger(i) || i < 0 || i >= items.length) return;
      const item = items[i];
      const status = 'result' in parsed! ? 200 : ((parsed as { status?: number }).status ?? 500);
      if ((status === 409 || status === 400) && item.withCode && !answered[i]) {
        // This worker does not have the code: this one goes again with it (nothing of it ran).
        answered[i] = true;
        leases[i]?.release();
        this.invokeOne(carryingCode(item)).then(item.resolve, item.reject);
        return;
      }
      if (status === 200) this.codeSent.set(item.codeKey, true);
      settle(i, () => (status === 200 ? asResult((parsed as { result: unknown }).result) : thrown(refusal(status))));
    };
    this.dispatch(
      `{"batch":[${items.map((item) => item.body).join(',')}]}`,
      Math.max(...items.map((item) => item.timeoutMs)),
      {
        onData: (status, chunk) => {
          if (status !== 200) return;
          // A newline byte is never part of a UTF-8 sequence, nor inside a JSON line: lines split on the bytes.
          let start = 0;
          for (;;) {
            const end = chunk.indexOf(0x0a, start);
            if (end < 0) {
              if (start < chunk.length) piece(chunk.subarray(start), false);
              break;
            }
            piece(chunk.subarray(start, end), true);
            start = end + 1;
          }
        },
        onComplete: (status) => {
          if (status === 400) {
            for (const lease of leases) lease?.release();
            return this.resend(unanswered());
          }
          for (const [i] of items.entries()) {
            settle(i, () =>
              thrown(
                status === 200
                  ? new Errors.RuntimeUnavailable(
                      'The reactor runtime ended a batch without answering every invocation.',
                    )
                  : refusal(status),
              ),
            );
          }
        },
        onError: (error, sent) => {
          if (!sent) {
            for (const lease of leases) lease?.release();
            return this.resend(unanswered());
          }
          for (const [i] of items.entries()) settle(i, () => thrown(unavailable(error)));
        },
      },
    );
  }

  /** Each on its own (with the single invocation's retry). */
  private resend(items: Queued[]): void {
    for (const item of items) this.invokeOne(item).then(item.resolve, item.reject);
  }

  /** One POST /invoke; rejects with SendError telling whether any of the request was written. */
  private post(outgoing: Outgoing): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      // Decoded chunk by chunk: each chunk can go as soon as it is text, where collecting the chunks, joining them
      // into one Buffer and decoding that held the answer three times over at the end.
      const decoder = new StringDecoder('utf8');
      let body = '';
      let received = 0;
      const lease = this.budget?.lease(outgoing.tenantId);
      this.dispatch(outgoing.body, outgoing.timeoutMs, {
        onData: (_status, chunk) => {
          received += chunk.length;
          if (received > this.maxAnswerBytes) throw new AnswerTooLarge();
          lease?.grow(chunk.length);
          body += decoder.write(chunk);
        },
        onComplete: (status) => resolve({ status, body: body + decoder.end(), lease }),
        onError: (error, sent) => {
          lease?.release();
          reject(new SendError(error, sent));
        },
      });
    });
  }

  /** POST /invoke through the pool; `sent` says whether any of the request was written when it failed. */
  private dispatch(body: string, timeoutMs: number, on: Exchange): void {
    let sent = false;
    let status = 0;
    let abort: ((error: Error) => void) | undefined;
    const handler = {
      onConnect(abortRequest: (error: Error) => void) {
        abort = abortRequest;
      },
      onRequestSent() {
        sent = true;
      },
      onBodySent() {
        sent = true;
      },
      onHeaders(statusCode: number) {
        sent = true;
        status = statusCode;
        return true;
      },
      onData(chunk: Buffer) {
        try {
          on.onData(status, chunk);
        } catch (error) {
          // The answer is too large: stop reading it (the connection is closed) and report it once.
          abort?.(error as Error);
          return false;
        }
        return true;
      },
      onComplete() {
        on.onComplete(status);
      },
      onError(error: Error) {
        on.onError(error, sent);
      },
    } as unknown as Dispatcher.DispatchHandler;
    // undici reports failures through the handler; a throw here is a programming error, answered all the same.
    try {
      this.pool.dispatch(
        {
          path: '/invoke',
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(body)),
            ...this.secretHeader,
          },
          body,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        },
        handler,
      );
    } catch (error) {
      on.onError(error as Error, sent);
    }
  }
}

/** The invocation again, this time with its code. */
function carryingCode(outgoing: Outgoing): Outgoing {
  return { ...outgoing, body: outgoing.withCode!(), withCode: undefined };
}

function parseOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function asResult(value: unknown): InvocationResult {
  if (value !== null && typeof value === 'object' && typeof (value as InvocationResult).ok === 'boolean')
    return value as InvocationResult;
  throw new Errors.Internal('The reactor runtime answered with something that is not an invocation result.');
}

/** What a worker's non-200 answer means to the caller. */
function refusal(status: number): VaultError {
  if (status === 503 || status >= 502) return new Errors.RuntimeUnavailable();
  // The workers require a worker secret the API does not have: a deployment to fix, not a bug or the caller's fault.
  if (status === 401)
    return new Errors.RuntimeUnavailable(
      'The reactor workers refused this API: its worker secret (TOKENVAULT_WORKER_SECRET_FILE) is not theirs.',
    );
  // 4xx: the API sent something the worker refuses, which is a bug here, not the caller's fault.
  return new Errors.Internal(`The reactor runtime refused the invocation (${status}).`);
}

function thrown(error: unknown): never {
  throw error;
}

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') return code;
  const cause = (error as { cause?: { code?: unknown } })?.cause?.code;
  return typeof cause === 'string' ? cause : '';
}

function unavailable(error: unknown): VaultError {
  const cause = error instanceof SendError ? error.cause : error;
  // The result budget's own refusal (result-budget.ts), answered as it is.
  if (cause instanceof VaultError) return cause;
  if (cause instanceof AnswerTooLarge) {
    return new Errors.ReactorResultTooLarge({
      detail: 'The reactor runtime answered with a result larger than allowed (TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES).',
      errors: { limit: ['TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES'] },
    });
  }
  const code = codeOf(cause);
  const detail =
    code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT'
      ? 'The reactor runtime did not answer in time; retry later.'
      : 'The reactor runtime is unavailable; retry later.';
  return new Errors.RuntimeUnavailable({ detail, cause });
}

// ---------------------------------------------------------------------------------------------- dev: a child worker
