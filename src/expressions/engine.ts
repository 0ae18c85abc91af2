// The one Liquid engine every expression goes through: locked down (no file system, no include/render/layout,
// strict filters, own properties only), bounded (template length; render time and memory per request, budget.ts),
// with the platform filters registered and parsed templates cached by source.
import { performance } from 'node:perf_hooks';
import { Context, Liquid, Output, Tag, Value, toValue, toValueSync, type FS, type Template } from 'liquidjs';
import { LRUCache } from 'lru-cache';
import { Errors, VaultError } from '../errors/registry.js';
import {
  DEFAULT_EXPRESSION_LIMITS,
  ExpressionLimitExceeded,
  LIMIT_SETTINGS,
  type ExpressionBudget,
  type ExpressionLimitName,
} from './budget.js';
import { platformFilters } from './filters.js';
import { restoreIds } from './scan.js';

/** Bounds on one expression; the time and memory all expressions of a request share are in budget.ts. */
export const EXPRESSION_LIMITS = Object.freeze({
  /** Longest Liquid source accepted for one string (one text-body expression, one mask string). */
  maxTemplateLength: 10_000,
  /** Longest text one string may render to. */
  maxOutputLength: 5_000_000,
});

const CACHE_MAX_ENTRIES = 5_000;
const CACHE_MAX_CHARS = 5_000_000;

/** A file system that holds nothing: any include/layout lookup that slips through fails. */
const noFileSystem: FS = {
  exists: async () => false,
  existsSync: () => false,
  readFile: async () => {
    throw new Error('file access is disabled');
  },
  readFileSync: () => {
    throw new Error('file access is disabled');
  },
  resolve: (_dir: string, file: string) => file,
  contains: async () => false,
  containsSync: () => false,
};

/** Text-mode output of a value: objects and arrays as JSON text, bytes as hex, nil as nothing. */
function outputText(this: { context: Context }, value: unknown): string {
  const v: unknown = toValue(value);
  if (typeof v === 'string') return v;
  if (v === null || v === undefined) return '';
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (typeof v === 'object') {
    const text = JSON.stringify(v) ?? '';
    this.context.memoryLimit.use(text.length);
    return text;
  }
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- only primitives get here (objects and nil are above)
  return String(v);
}

function createEngine(): Liquid {
  const liquid = new Liquid({
    fs: noFileSystem,
    root: [],
    partials: [],
    layouts: [],
    relativeReference: false,
    dynamicPartials: false,
    strictFilters: true,
    strictVariables: false,
    ownPropertyOnly: true,
    outputEscape: outputText,
    parseLimit: EXPRESSION_LIMITS.maxTemplateLength,
    // Replaced per render by the request's budget (budget.ts); these are only the fallbacks.
    renderLimit: DEFAULT_EXPRESSION_LIMITS.renderMs,
    memoryLimit: DEFAULT_EXPRESSION_LIMITS.memoryUnits,
    timezoneOffset: 0,
    locale: 'en-US',
  });
  // Tags that read other templates are refused when the template is parsed.
  for (const name of ['include', 'render', 'layout']) {
    liquid.registerTag(
      name,
      class extends Tag {
        constructor(...args: ConstructorParameters<typeof Tag>) {
          super(...args);
          throw new Error(`the ${name} tag is not supported in expressions`);
        }
        *render(): Generator<unknown, void, unknown> {}
      },
    );
  }
  for (const [name, filter] of Object.entries(platformFilters)) liquid.registerFilter(name, filter);
  return liquid;
}

export const engine = createEngine();

/**
 * A parsed source: its templates, and when the source is exactly one `{{ ... }}` that output's value (expression and
 * filters without the text-mode output escape that Output appends), evaluated to keep its type.
 */
export interface Parsed {
  templates: Template[];
  single?: Value;
}

type CacheEntry = Parsed | { error: string };

const cache = new LRUCache<string, CacheEntry>({
  max: CACHE_MAX_ENTRIES,
  maxSize: CACHE_MAX_CHARS,
  sizeCalculation: (_value, key) => key.length + 64,
});

/** Drops every cached template (tests). */
export function clearTemplateCache(): void {
  cache.clear();
}

/**
 * Parses a Liquid source (cached by source). Throws InvalidBody for a source that is too long or does not parse,
 * with `__t<n>` variables in the message put back as the token ids.
 */
export function parse(source: string, ids: readonly string[] = []): Parsed {
  if (source.length > EXPRESSION_LIMITS.maxTemplateLength) {
    throw new Errors.InvalidBody(
      `An expression is longer than the ${EXPRESSION_LIMITS.maxTemplateLength} characters allowed.`,
    );
  }
  let entry = cache.get(source);
  if (entry === undefined) {
    try {
      const templates = engine.parse(source);
      const only = templates.length === 1 ? templates[0] : undefined;
      const single = only instanceof Output ? new Value(only.token.content, engine) : undefined;
      entry = { templates, single };
    } catch (err) {
      entry = { error: err instanceof Error ? err.message : String(err) };
    }
    cache.set(source, entry);
  }
  if ('error' in entry) throw new Errors.InvalidBody(`Invalid expression: ${restoreIds(entry.error, ids)}.`);
  return entry;
}

/** Parse check only: the error message for an invalid source, else undefined. */
export function parseError(source: string): string | undefined {
  try {
    parse(source);
    return undefined;
  } catch (err) {
    return err instanceof VaultError ? err.detail : String(err);
  }
}

/** The liquidjs memory limiter of each request's budget, shared by all its renders. */
const memoryLimiters = new WeakMap<ExpressionBudget, Context['memoryLimit']>();

function memoryLimiter(budget: ExpressionBudget): Context['memoryLimit'] {
  let limiter = memoryLimiters.get(budget);
  if (limiter === undefined) {
    limiter = new Context({}, engine.options, { sync: true, memoryLimit: budget.limits.memoryUnits }).memoryLimit;
    memoryLimiters.set(budget, limiter);
  }
  return limiter;
}

/**
 * Evaluates a parsed source within the request's budget: waits for its turn on the event loop, renders synchronously
 * within what is left, and charges the time it took. A source that is one output keeps the value's type (an object
 * stays an object, a number a number); anything else renders to text.
 */
export async function evaluate(
  parsed: Parsed,
  scope: Record<string, unknown>,
  budget: ExpressionBudget,
  ids: readonly string[],
): Promise<unknown> {
  let started: number | undefined;
  try {
    const wait = budget.turn();
    if (wait) await wait;
    // From here to the end of the render nothing awaits: the turn is this render's.
    const renderLimit = budget.begin();
    started = performance.now();
    const ctx = new Context(
      scope,
      engine.options,
      { sync: true },
      {
        liquid: engine,
        memoryLimit: memoryLimiter(budget),
        renderLimit: renderLimit as unknown as Context['renderLimit'],
      },
    );
    if (parsed.single) return toJsonValue(toValueSync(parsed.single.value(ctx, false)));
    const text = engine.renderSync(parsed.templates, ctx) as string;
    if (text.length > EXPRESSION_LIMITS.maxOutputLength) throw new RangeError('Invalid string length');
    return text;
  } catch (err) {
    throw expressionError(err, ids, budget);
  } finally {
    if (started !== undefined) budget.charge(performance.now() - started);
  }
}

/** The JSON form of a typed result: undefined is null, bytes are hex, drops their value. */
function toJsonValue(value: unknown): unknown {
  const v: unknown = toValue(value);
  if (v === undefined) return null;
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  return v;
}

/**
 * The InvalidBody for an error raised while rendering. Platform filter errors carry their own detail; limit errors
 * say which limit; anything else names the failing expression (template text, never the data) and not the
 * underlying message, which could quote token data.
 */
export function expressionError(err: unknown, ids: readonly string[], budget?: ExpressionBudget): VaultError {
  let cause: unknown = err;
  for (let depth = 0; depth < 8 && cause instanceof Error; depth++) {
    if (cause instanceof VaultError) return cause;
    if (cause instanceof ExpressionLimitExceeded) return limitError(cause.limit, budget);
    const next = (cause as { originalError?: unknown }).originalError ?? cause.cause;
    if (next === undefined) break;
    cause = next;
  }
  const message = err instanceof Error ? err.message : '';
  const innermost = cause instanceof Error ? cause.message : message;
  if (/memory alloc limit exceeded/.test(message) || /Invalid (string|array|typed array) length/.test(innermost)) {
    return limitError('memory', budget);
  }
  if (/template render limit exceeded/.test(message)) return limitError('render', budget);
  if (/Maximum call stack size exceeded/.test(innermost)) {
    return new Errors.InvalidBody('An expression is nested too deeply.');
  }
  const token = (err as { token?: { getText?: () => string } } | undefined)?.token;
  const text = typeof token?.getText === 'function' ? token.getText() : undefined;
  const where = text && text.length <= 200 ? ` ${restoreIds(text, ids)}` : '';
  return new Errors.InvalidBody(`The expression${where} could not be evaluated.`);
}

/** The problem for a request whose expressions ran into one of its limits (budget.ts): which one, and its setting. */
function limitError(limit: ExpressionLimitName, budget?: ExpressionBudget): VaultError {
  const limits = budget?.limits ?? DEFAULT_EXPRESSION_LIMITS;
  const setting = LIMIT_SETTINGS[limit];
  const detail = {
    render: `An expression took longer than the ${limits.renderMs} ms one render may take (${setting}); simplify it.`,
    budget: `The expressions of this request took longer than the ${limits.budgetMs} ms they may take together (${setting}); send fewer or simpler ones.`,
    deadline: `The expressions of this request did not finish within ${limits.deadlineMs} ms (${setting}); send fewer or simpler ones.`,
    memory: `The expressions of this request need more than the ${limits.memoryUnits} memory units allowed (${setting}); simplify them.`,
  }[limit];
  return new Errors.ExpressionLimit({ detail, errors: { limit: [setting] } });
}
