import { HopConnection, postBytes } from "./hop-client.js";
import type { HopWindow } from "./hop-profile.js";
import type { HopTap } from "./hop-tap.js";
import type { ProxyMode } from "./proxy-options.js";
import { processCpuMs, processPreemptions } from "./relay-cpu.js";

/*
 * One target's calls of one mode in one round of bench:hop, run a slice at a time
 * between the other targets' slices (hop-trace.ts). The machine's drift (other work
 * coming and going) then falls on every target alike, where whole blocks of 2,000
 * calls each met their own minute. Its own connection stays open across slices; CPU
 * and the engine's preemptions are counted over its slices only.
 */

export interface HopTarget {
  name: string;
  url: string;
  tap: HopTap;
  /** Headers of the next call (the pools: a fresh edge signature each). */
  prepare(count: number, body: string): Promise<() => Record<string, string>>;
  /** Its own process (the engine's for the engine direct). */
  pid?: number;
}

/** A round's figures for one target, µs per call. */
export interface HopFigures {
  inP50: number;
  outP50: number;
  totalP50: number;
  totalP99: number;
  /** CPU of the target's own process; NaN when not read. */
  cpuUs: number;
  /** Times the engine's main thread was preempted (involuntary context switches) per call, while this target's calls ran. */
  enginePreemptions: number;
}

const quantile = (sorted: Float64Array, q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;

/** What runInterleaved takes turns between: a TargetRound, or a test's fake. */
export interface SlicedRun {
  readonly remaining: number;
  runSlice(count: number, windows: HopWindow[] | undefined): Promise<void>;
  close(): void;
}

export class TargetRound implements SlicedRun {
  readonly #target: HopTarget;
  readonly #label: string;
  readonly #mode: ProxyMode;
  readonly #requests: Buffer[];
  readonly #check: (body: string) => boolean;
  readonly #connection: HopConnection;
  readonly #enginePid: number;
  readonly #in: Float64Array;
  readonly #out: Float64Array;
  readonly #total: Float64Array;
  #done = 0;
  #cpuMs = 0;
  #cpuRead = true;
  #preemptions = 0;

  private constructor(target: HopTarget, label: string, mode: ProxyMode, requests: Buffer[], check: (body: string) => boolean, connection: HopConnection, enginePid: number) {
    this.#target = target;
    this.#label = label;
    this.#mode = mode;
    this.#requests = requests;
    this.#check = check;
    this.#connection = connection;
    this.#enginePid = enginePid;
    this.#in = new Float64Array(requests.length);
    this.#out = new Float64Array(requests.length);
    this.#total = new Float64Array(requests.length);
  }

  /** Its requests made (signed, for a pool) and its connection open: nothing of this is timed. */
  static async open(
    target: HopTarget,
    label: string,
    run: { mode: ProxyMode; body: string; count: number; check: (body: string) => boolean; enginePid: number },
  ): Promise<TargetRound> {
    const headersOf = await target.prepare(run.count, run.body);
    const requests = Array.from({ length: run.count }, () => postBytes(target.url, { "content-type": "application/json", ...headersOf() }, run.body));
    const connection = await HopConnection.open(target.url);
    return new TargetRound(target, label, run.mode, requests, run.check, connection, run.enginePid);
  }

  get remaining(): number {
    return this.#requests.length - this.#done;
  }

  /** Its next `count` calls, one after another; each answer must be a complete completion. */
  async runSlice(count: number, windows: HopWindow[] | undefined): Promise<void> {
    const { tap, pid } = this.#target;
    const cpuBefore = pid === undefined ? undefined : processCpuMs(pid);
    const preemptedBefore = processPreemptions(this.#enginePid);
    const end = Math.min(this.#requests.length, this.#done + count);
    for (; this.#done < end; this.#done++) {
      const i = this.#done;
      tap.reset();
      const answer = await this.#connection.exchange(this.#requests[i] as Buffer);
      const { requestFirstByteNs: firstNs, answerLastByteNs: lastNs } = tap;
      if (answer.status !== 200 || !this.#check(answer.body)) {
        throw new Error(`${this.#label} ${this.#mode}: not a complete completion (status ${answer.status}): ${answer.body.slice(0, 300)}`);
      }
      if (firstNs === undefined || lastNs === undefined) throw new Error(`${this.#label}: the call did not cross its tap`);
      this.#in[i] = Number(firstNs - answer.sentNs) / 1_000;
      this.#out[i] = Number(answer.answeredNs - lastNs) / 1_000;
      this.#total[i] = Number(answer.answeredNs - answer.sentNs) / 1_000;
      if (windows !== undefined) {
        windows.push({ phase: "in", startUs: Number(answer.sentNs / 1_000n), endUs: Number(firstNs / 1_000n) });
        windows.push({ phase: "out", startUs: Number(lastNs / 1_000n), endUs: Number(answer.answeredNs / 1_000n) });
      }
    }
    const cpuAfter = pid === undefined ? undefined : processCpuMs(pid);
    if (cpuBefore === undefined || cpuAfter === undefined) this.#cpuRead = false;
    else this.#cpuMs += cpuAfter - cpuBefore;
    this.#preemptions += (processPreemptions(this.#enginePid) ?? Number.NaN) - (preemptedBefore ?? Number.NaN);
  }

  close(): void {
    this.#connection.close();
  }

  figures(): HopFigures {
    const calls = this.#done;
    const sorted = [this.#in, this.#out, this.#total].map((values) => values.slice(0, calls).sort());
    const [inUs, outUs, totalUs] = sorted as [Float64Array, Float64Array, Float64Array];
    return {
      inP50: quantile(inUs, 0.5),
      outP50: quantile(outUs, 0.5),
      totalP50: quantile(totalUs, 0.5),
      totalP99: quantile(totalUs, 0.99),
      cpuUs: this.#cpuRead && calls > 0 ? (this.#cpuMs * 1_000) / calls : Number.NaN,
      enginePreemptions: calls > 0 ? this.#preemptions / calls : Number.NaN,
    };
  }
}

/**
 * Runs every target's round a slice at a time, the first target moving one place on at
 * each slice (starting at `first`: the round's number), so none always follows the
 * same one. Closes them all, whatever happens.
 */
export async function runInterleaved<Run extends SlicedRun>(
  rounds: readonly Run[],
  slice: number,
  first: number,
  windowsOf: (round: Run) => HopWindow[] | undefined,
): Promise<void> {
  try {
    for (let k = first; rounds.some((round) => round.remaining > 0); k++) {
      for (let j = 0; j < rounds.length; j++) {
        const round = rounds[(k + j) % rounds.length] as Run;
        if (round.remaining > 0) await round.runSlice(slice, windowsOf(round));
      }
    }
  } finally {
    for (const round of rounds) round.close();
  }
}
