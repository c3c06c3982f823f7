import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

/*
 * Which CPUs a proxy benchmark's processes may run on (bench:hop, bench:proxy). On this
 * 2-vCPU VM a call at one connection crosses processes four or six times, and where the
 * kernel puts each process decides what a crossing costs: a wake on the waker's own CPU
 * is a switch of a few µs; a wake on the other vCPU, halted while idle, is an interrupt
 * to the host and back, ~25-40 µs (perf sched timehist, README "tenth pass"). Left
 * free, the kernel's load balancing gave a busy pool a vCPU of its own and let the bare
 * node proxy share the client's, so the two hops were not measured alike. A placement
 * pins every process the same way for every target, with taskset (util-linux): its
 * children are started under `taskset -c`, and the benchmark pins its own threads (the
 * client, and bench:hop's taps) and gives them back their CPUs when it is done.
 *
 * No placement parts the client from the engine with the proxy beside the engine (the
 * pool core sharing a GPU host's CPUs with the engine's server): bench:hop's taps live
 * in the client's process, so there a proxy's path would cross between CPUs three times
 * each way instead of once (measured: the bare node proxy +0.41 ms).
 */

export const PLACEMENTS = ["free", "proxy-alone", "engine-alone", "one-cpu"] as const;
export type Placement = (typeof PLACEMENTS)[number];

/** CPU lists (taskset's syntax) per part of the benchmark; a part left out runs where the kernel puts it. */
export interface CpuPlan {
  /** The benchmark's own process: the client (and bench:hop's taps). */
  bench?: string;
  engine?: string;
  /** The target between the client and the engine: the node proxy or a pool core. */
  proxy?: string;
}

/** The --placement values for a usage text, each line after the first indented by `indent`. */
export const placementHelp = (indent: string): string =>
  [
    "free (the kernel places every process; the default),",
    "proxy-alone (the proxy on a CPU of its own, the client and the engine on another),",
    "engine-alone (the engine on a CPU of its own, the client and the proxy on another),",
    "one-cpu (all on one)",
  ].join(`\n${indent}`);

/** The CPUs of a taskset-style list ("0-1,4" → [0, 1, 4]). */
export function cpusOfList(list: string): number[] {
  const cpus: number[] = [];
  for (const part of list.split(",")) {
    const [first, last = first] = part.split("-").map(Number);
    if (first === undefined || last === undefined || !Number.isInteger(first) || !Number.isInteger(last) || first > last) throw new Error(`not a CPU list: "${list}"`);
    for (let cpu = first; cpu <= last; cpu++) cpus.push(cpu);
  }
  return cpus;
}

/**
 * The CPUs each part gets under `placement`, from the CPUs the benchmark may use (its
 * own Cpus_allowed_list, read before it pins itself): the first, and for a placement
 * that splits the parts, the second.
 */
export function cpuPlanOf(placement: Placement, allowed: readonly number[]): CpuPlan {
  if (placement === "free") return {};
  const [first, second] = allowed.map(String);
  if (first === undefined) throw new Error("no CPU to run on");
  if (placement === "one-cpu") return { bench: first, engine: first, proxy: first };
  if (second === undefined) throw new Error(`--placement ${placement} needs two CPUs; this process may use ${allowed.length}`);
  return placement === "proxy-alone" ? { bench: first, engine: first, proxy: second } : { bench: first, engine: second, proxy: first };
}

/** The CPUs a thread of a process may run on (its main thread by default), from /proc (Linux): its Cpus_allowed_list, e.g. "0-1". */
export function cpusAllowedOf(pid: number, thread: number = pid): string {
  const file = `/proc/${pid}/task/${thread}/status`;
  const line = /^Cpus_allowed_list:\s*(\S+)$/m.exec(readFileSync(file, "utf8"));
  if (line?.[1] === undefined) throw new Error(`${file} has no Cpus_allowed_list`);
  return line[1];
}

/** Pins every thread of `pid` to `cpus` (threads started later inherit it). */
export function pinProcess(pid: number, cpus: string): void {
  execFileSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { stdio: "ignore" });
}

/** The command that starts `command` on `cpus` only: taskset execs it, so the child's pid is the command's. */
export function commandOnCpus(cpus: string | undefined, command: string, args: readonly string[]): { command: string; args: string[] } {
  return cpus === undefined ? { command, args: [...args] } : { command: "taskset", args: ["-c", cpus, command, ...args] };
}

/** The placement as a report names it. */
export function placementLine(placement: Placement, plan: CpuPlan): string {
  if (plan.bench === undefined) return "free (the kernel places every process)";
  return `${placement} (client on CPU ${plan.bench}, engine on CPU ${plan.engine}, proxy on CPU ${plan.proxy})`;
}

/**
 * Runs `work` with this process pinned where `placement` puts the client, handing it
 * the plan for the processes it starts; this process gets its own CPUs back after, even
 * when `work` fails.
 */
export async function underPlacement<T>(placement: Placement, work: (plan: CpuPlan) => Promise<T>): Promise<T> {
  const own = cpusAllowedOf(process.pid);
  const plan = cpuPlanOf(placement, cpusOfList(own));
  if (plan.bench === undefined) return work(plan);
  pinProcess(process.pid, plan.bench);
  try {
    return await work(plan);
  } finally {
    pinProcess(process.pid, own);
  }
}
