// The work every expression of one request may cause, together: Liquid masks, fingerprint expressions and
// detokenization templates all render synchronously on the API's event loop, so a budget per render is not enough (a
// bulk /tokenize of a hundred tokens with a slow mask each would hold the loop for a hundred budgets). One
// ExpressionBudget per request (bound by the HTTP layer with `withExpressionBudget`) is shared by every render of that
// request:
//   - renderMs: one render holds the event loop at most this long (liquidjs's renderLimit, checked before every
//     template node, so a nested loop stops within it);
//   - budgetMs: the render time of all the request's expressions together;
//   - deadlineMs: wall clock from the request's first expression on, waiting for a turn included;
//   - memoryUnits: liquidjs's memoryLimit (string lengths, array and range sizes), shared by all renders.
// And between renders the event loop gets its turn: once expressions of any request have computed for YIELD_AFTER_MS
// in one turn of the loop, further renders wait in a FIFO lane that lets one render run per turn, so probes and
// other requests are served between them however many hostile requests run at once.
import { AsyncLocalStorage } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';

export interface ExpressionLimits {
  /** Longest one render may hold the event loop, in ms. */
  renderMs: number;
  /** Render time all expressions of one request may use together, in ms. */
  budgetMs: number;
  /** Wall-clock time from a request's first expression to its last, waiting for a turn included, in ms. */
  deadlineMs: number;
  /** Liquid memory units (string lengths, array and range sizes) all expressions of one request may allocate. */
  memoryUnits: number;
}

export const DEFAULT_EXPRESSION_LIMITS: Readonly<ExpressionLimits> = Object.freeze({
  renderMs: 10,
  budgetMs: 250,
  deadlineMs: 5_000,
  memoryUnits: 10_000_000,
});

/** Which limit a request's expressions ran into, and the setting that changes it. */
export type ExpressionLimitName = 'render' | 'budget' | 'deadline' | 'memory';

export const LIMIT_SETTINGS: Record<ExpressionLimitName, string> = {
  render: 'TOKENVAULT_EXPRESSION_RENDER_MS',
  budget: 'TOKENVAULT_EXPRESSION_BUDGET_MS',
  deadline: 'TOKENVAULT_EXPRESSION_DEADLINE_MS',
  memory: 'TOKENVAULT_EXPRESSION_MEMORY_UNITS',
};

/** Expression work done since the loop last had a turn without any (all requests), in ms. */
let turnSpent = 0;
/** Renders waiting for a turn of their own, first come first served. */
const lane: Array<() => void> = [];
let ticking = false;
/** A render was let out of the lane and has not run yet: nobody else starts before it. */
let granted = false;
/** Expression work in one turn of the loop after which renders queue for turns of their own. */
const YIELD_AFTER_MS = 2;

/**
 * Runs once per turn of the event loop (setImmediate: after the loop polled for I/O) while there is expression work
 * about: a turn in which renders ran lets the loop go round once more without any; a quiet one lets the next waiting
 * render out. So at most one render's worth of expression work happens between two polls for I/O.
 */
function tick(): void {
  if (ticking) return;
  ticking = true;
  setImmediate(() => {
    ticking = false;
    if (turnSpent > 0) {
      turnSpent = 0;
      if (lane.length > 0) tick();
      return;
    }
    const next = lane.shift();
    if (next) {
      granted = true;
      next();
    }
    if (lane.length > 0 || turnSpent > 0) tick();
  });
}

function noteTurnWork(ms: number): void {
  turnSpent += ms;
  tick();
}

/**
 * Whether a render may start now. Checked synchronously right before the render (an await in between would let
 * other requests' renders pass the same check first): at once while this turn of the loop has spent little on
 * expressions and nobody is waiting, else only the render the lane let out.
 */
function mayRunNow(fromLane: boolean): boolean {
  if (fromLane) {
    granted = false;
    return true;
  }
  return !granted && lane.length === 0 && turnSpent < YIELD_AFTER_MS;
}

function waitForTurn(): Promise<void> {
  return new Promise<void>((resolve) => {
    lane.push(resolve);
    tick();
  });
}

/** A liquidjs renderLimit: `check(now)` fails past `until`, remembering which of the request's limits that was. */
class RenderDeadline {
  constructor(
    readonly until: number,
    readonly limit: ExpressionLimitName,
  ) {}

  check(now: number): void {
    if (now > this.until) throw new ExpressionLimitExceeded(this.limit);
  }

  use(): void {}
}

/** Thrown (inside liquidjs, which wraps it) when a render passes one of the request's limits. */
export class ExpressionLimitExceeded extends Error {
  constructor(readonly limit: ExpressionLimitName) {
    super(`expression ${limit} limit exceeded`);
    this.name = 'ExpressionLimitExceeded';
  }
}

export class ExpressionBudget {
  private spentMs = 0;
  private startedAt?: number;
  private fromLane = false;

  constructor(readonly limits: ExpressionLimits) {}

  /**
   * Resolves when a render may start: at once (undefined, no await) or after waiting in the lane. The caller must
   * then call `begin` synchronously and render right away.
   */
  turn(): Promise<void> | undefined {
    this.startedAt ??= performance.now();
    if (mayRunNow(false)) return undefined;
    return waitForTurn().then(() => {
      this.fromLane = true;
    });
  }

  /**
   * The render limit for a render starting now: the tightest of renderMs, what is left of budgetMs and the deadline.
   * Throws ExpressionLimitExceeded when nothing is left.
   */
  begin(): RenderDeadline {
    mayRunNow(this.fromLane);
    this.fromLane = false;
    const now = performance.now();
    const bounds: Array<[number, ExpressionLimitName]> = [
      [now + this.limits.renderMs, 'render'],
      [now + (this.limits.budgetMs - this.spentMs), 'budget'],
      [(this.startedAt ?? now) + this.limits.deadlineMs, 'deadline'],
    ];
    let [until, limit] = bounds[0];
    for (const [at, name] of bounds) if (at < until) [until, limit] = [at, name];
    if (until <= now) throw new ExpressionLimitExceeded(limit);
    return new RenderDeadline(until, limit);
  }

  /** Charges a finished (or failed) render's time to the request and to this turn of the loop. */
  charge(ms: number): void {
    this.spentMs += ms;
    noteTurnWork(ms);
  }
}

// The request's budget reaches the renders through AsyncLocalStorage, so the domain services keep taking and
// returning plain values. Its cost on Node 20 (async hooks on every promise): ~0.1 µs per await, measured in isolation,
// a few µs per token create; threading the budget through the services' signatures is the alternative if that shows.
const current = new AsyncLocalStorage<ExpressionBudget>();

/** Runs `fn` (a request) with one expression budget shared by everything it renders. */
export function withExpressionBudget<T>(limits: ExpressionLimits, fn: () => T): T {
  return current.run(new ExpressionBudget(limits), fn);
}

/** The budget of the request being served, or a fresh one with the defaults (calls outside a request). */
export function currentBudget(): ExpressionBudget {
  return current.getStore() ?? new ExpressionBudget(DEFAULT_EXPRESSION_LIMITS);
}
