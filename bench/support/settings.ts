// What every benchmark shares: how long and how hard to push, read once from the environment (see README.md,
// "Benchmarks"), and the shape a benchmark file exports so bench/main.ts can run it.

export interface Settings {
  /** Concurrent clients (workers, and HTTP connections). BENCH_CONCURRENCY, default 32. */
  concurrency: number;
  /** Length of one measured window. BENCH_SECONDS, default 5. */
  seconds: number;
  /** Unmeasured run of each operation before the first round (JIT, caches, connections). BENCH_WARMUP_SECONDS, default 5. */
  warmupSeconds: number;
  /** Rounds of each baseline/subject pair; the report shows their median and spread. BENCH_ROUNDS, default 3. */
  rounds: number;
  /** Hard cap on requests in one window. BENCH_MAX_OPS, default 250000. */
  maxOps: number;
  /** Log level of the API under test. BENCH_API_LOG_LEVEL, default info (what a deployment runs). */
  apiLogLevel: string;
  /** Record a CPU profile of the API and print where its time went. BENCH_PROFILE=1 or --profile. */
  profile: boolean;
}

export interface Benchmark {
  name: string;
  /** One line for --list. */
  description: string;
  run(settings: Settings): Promise<void>;
}

export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const number = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min || value > max)
      throw new Error(`${name} must be a number from ${min} to ${max}, got ${JSON.stringify(raw)}`);
    return value;
  };
  return {
    concurrency: Math.round(number('BENCH_CONCURRENCY', 32, 1, 1024)),
    seconds: number('BENCH_SECONDS', 5, 0.5, 300),
    warmupSeconds: number('BENCH_WARMUP_SECONDS', 5, 0, 300),
    rounds: Math.round(number('BENCH_ROUNDS', 3, 1, 20)),
    maxOps: Math.round(number('BENCH_MAX_OPS', 250_000, 100, 10_000_000)),
    apiLogLevel: env.BENCH_API_LOG_LEVEL?.trim() || 'info',
    profile: ['1', 'true', 'yes'].includes((env.BENCH_PROFILE ?? '').trim().toLowerCase()),
  };
}

/** A benchmark's own whole-number setting from the environment: `fallback` when unset, an error naming it when out of range. */
export function wholeNumberSetting(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < min || value > max)
    throw new Error(`${name} must be a whole number from ${min} to ${max}`);
  return value;
}
