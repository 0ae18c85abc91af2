// A closed-loop load generator: `concurrency` workers, each sending its next request as soon as the previous one
// answered, for a fixed time or until a request cap, whichever comes first. Latency is measured per request; CPU
// is measured per process over the same window, so a result says both how fast and who spent the time.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

export interface LoadOptions {
  concurrency: number;
  seconds: number;
  /** Hard cap on requests in this window, so a very fast operation cannot run up memory or time. */
  maxOps: number;
  /** Processes whose CPU time is reported next to the result (the benchmark process itself is always `bench`). */
  processes?: Record<string, number | undefined>;
}

export interface LoadResult {
  /** Requests that succeeded. */
  ops: number;
  errors: number;
  firstError?: string;
  seconds: number;
  opsPerSecond: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  /**
   * CPU cores each process used on average over the window (1.0 = one core busy throughout); `all` is the machine,
   * `other` is `all` minus the named processes.
   */
  cores: Record<string, number | undefined>;
  /** Monotonic clock (µs, the clock of V8 CPU profiles) at the start and end of the window. */
  startUs: number;
  endUs: number;
}

/** One request. `worker` is 0..concurrency-1 and `n` counts this window's requests; throw to count an error. */
export type Operation = (worker: number, n: number) => Promise<void>;

export async function runLoad(operation: Operation, options: LoadOptions): Promise<LoadResult> {
  const latencies = new Float64Array(options.maxOps);
  let issued = 0;
  let completed = 0;
  let errors = 0;
  let firstError: string | undefined;
  let stopping = false;

  const cpuBefore = sampleCpu(options.processes ?? {});
  const startUs = monotonicUs();
  const start = performance.now();
  const timer = setTimeout(() => (stopping = true), options.seconds * 1000);

  const worker = async (index: number) => {
    while (!stopping && issued < options.maxOps) {
      const n = issued++;
      const sent = performance.now();
      try {
        await operation(index, n);
        latencies[completed++] = performance.now() - sent;
      } catch (error) {
        errors++;
        firstError ??= (error as Error)?.message ?? String(error);
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, i) => worker(i)));
  clearTimeout(timer);

  const seconds = (performance.now() - start) / 1000;
  const endUs = monotonicUs();
  const cores = coresUsed(cpuBefore, sampleCpu(options.processes ?? {}), seconds);
  const sorted = latencies.subarray(0, completed).sort();
  return {
    ops: completed,
    errors,
    firstError,
    seconds,
    opsPerSecond: completed / seconds,
    p50Ms: percentile(sorted, 0.5),
    p90Ms: percentile(sorted, 0.9),
    p99Ms: percentile(sorted, 0.99),
    cores,
    startUs,
    endUs,
  };
}

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

// --- CPU accounting (Linux /proc; elsewhere only the benchmark process itself is measured) ----------------------

interface CpuSample {
  /** CPU seconds per process name. */
  seconds: Record<string, number | undefined>;
  /** Busy seconds of the whole machine, summed over cores. */
  machine?: number;
}

let clockTicks: number | undefined;

function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

function sampleCpu(processes: Record<string, number | undefined>): CpuSample {
  const own = process.cpuUsage();
  const seconds: Record<string, number | undefined> = { bench: (own.user + own.system) / 1e6 };
  for (const [name, pid] of Object.entries(processes))
    seconds[name] = pid === undefined ? undefined : processCpuSeconds(pid);
  return { seconds, machine: machineBusySeconds() };
}

/** utime + stime of a process from /proc/<pid>/stat (fields 14 and 15, counted after the command name). */
export function processCpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

/** Non-idle time of all cores from /proc/stat. */
function machineBusySeconds(): number | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const [, ...values] = line.trim().split(/\s+/);
    // user nice system idle iowait irq softirq steal: everything but idle and iowait is busy.
    const [user, nice, system, , , irq, softirq, steal] = values.map(Number);
    return (user + nice + system + irq + softirq + (steal || 0)) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

function coresUsed(before: CpuSample, after: CpuSample, seconds: number): Record<string, number | undefined> {
  const cores: Record<string, number | undefined> = {};
  for (const [name, value] of Object.entries(after.seconds)) {
    const previous = before.seconds[name];
    cores[name] = value === undefined || previous === undefined ? undefined : (value - previous) / seconds;
  }
  cores.all =
    after.machine === undefined || before.machine === undefined
      ? undefined
      : (after.machine - before.machine) / seconds;
  // Whatever else ran: the kernel's own work (network stack, softirqs) and any other process on the machine.
  const known = Object.values(cores).reduce<number>((sum, value) => sum + (value ?? 0), 0) - (cores.all ?? 0);
  cores.other = cores.all === undefined ? undefined : Math.max(0, cores.all - known);
  return cores;
}
