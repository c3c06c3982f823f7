import { readFileSync } from "node:fs";

/*
 * CPU time of the benchmark's processes, read from outside: /proc/<pid>/stat for a
 * child (no IPC round trip, so a saturated child's busy event loop cannot delay its
 * own reading), process.cpuUsage() for this process. Sampled on a timer during a run,
 * so the share over any window (the steady one, known only afterwards) can be taken.
 */

/** USER_HZ: the unit of utime/stime in /proc/<pid>/stat; 100 on every Linux ABI Node runs on. */
const CLOCK_TICKS_PER_SECOND = 100;

/** User + system CPU ms of a process so far; undefined where /proc is not there (not Linux) or it has exited. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after "pid (comm) ".
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
    return ((utime + stime) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/**
 * Times the process's main thread was preempted, taken off a CPU while it still had
 * work (/proc/<pid>/status, nonvoluntary_ctxt_switches); undefined where not readable.
 */
export function processPreemptions(pid: number): number | undefined {
  try {
    const match = /^nonvoluntary_ctxt_switches:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match === null ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

/**
 * Time the process's main thread has spent runnable but waiting for a CPU, in ms
 * (/proc/<pid>/schedstat, second field, ns): high while CPU use is low means the
 * machine starved it (other work), not that it had nothing to do.
 */
export function processRunQueueWaitMs(pid: number): number | undefined {
  try {
    const waitNs = Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[1]);
    return Number.isFinite(waitNs) ? waitNs / 1e6 : undefined;
  } catch {
    return undefined;
  }
}

export function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

export interface CpuSample {
  /** On the run's clock (performance.now()). */
  atMs: number;
  cpuMs: number;
}

/** Samples named processes every `periodMs` until stopped. */
export class CpuSampler {
  readonly #samples = new Map<string, CpuSample[]>();
  readonly #timer: NodeJS.Timeout;

  constructor(
    private readonly readers: Record<string, () => number | undefined>,
    periodMs = 100,
  ) {
    for (const name of Object.keys(readers)) this.#samples.set(name, []);
    this.sample();
    this.#timer = setInterval(() => this.sample(), periodMs);
  }

  sample(): void {
    const atMs = performance.now();
    for (const [name, read] of Object.entries(this.readers)) {
      const cpuMs = read();
      if (cpuMs !== undefined) this.#samples.get(name)?.push({ atMs, cpuMs });
    }
  }

  stop(): void {
    clearInterval(this.#timer);
    this.sample();
  }

  /**
   * Each process's CPU over [fromMs, toMs] as a percentage of one core, from the first
   * and last sample inside the window (the whole run's when fewer than two fall in it);
   * null when the process could not be read.
   */
  sharesOver(fromMs: number, toMs: number): Record<string, number | null> {
    const shares: Record<string, number | null> = {};
    for (const [name, samples] of this.#samples) {
      const inside = samples.filter((s) => s.atMs >= fromMs && s.atMs <= toMs);
      const used = inside.length >= 2 ? inside : samples;
      const first = used[0];
      const last = used[used.length - 1];
      shares[name] =
        first === undefined || last === undefined || last.atMs <= first.atMs
          ? null
          : Math.round(((last.cpuMs - first.cpuMs) / (last.atMs - first.atMs)) * 1000) / 10;
    }
    return shares;
  }
}
