import os from "node:os";

/** The machine a benchmark ran on, printed beside its figures (they move with its load). */
export interface BenchMachine {
  cpus: number;
  cpuModel: string;
  node: string;
  platform: string;
  /** 1-minute load average when the run started and when it ended (other work on the machine). */
  loadAverage: { start: number; end: number };
}

/** The 1-minute load average, to two decimals. */
export const loadAverageNow = () => Math.round((os.loadavg()[0] ?? 0) * 100) / 100;

/** Describes this machine for a run that started at load average `startLoad`. */
export function benchMachine(startLoad: number): BenchMachine {
  return {
    // The machine's, not this process's: availableParallelism() is what a placement pinned the benchmark to.
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model.trim() ?? "unknown",
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    loadAverage: { start: startLoad, end: loadAverageNow() },
  };
}
