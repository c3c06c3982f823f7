import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism, cpus } from "node:os";
import { describe, expect, it } from "vitest";
import { parseHopTraceArgs, runHopTrace } from "../../../src/cli/bench/hop-trace.js";
import { commandOnCpus, cpuPlanOf, cpusAllowedOf, cpusOfList, type Placement } from "../../../src/cli/bench/placement.js";
import { startEngineProcess } from "../../../src/cli/bench/proxy-server-process.js";
import { parseProxyBenchArgs } from "../../../src/cli/bench/proxy-options.js";
import { proxyReportHeader, summariseProxyReport } from "../../../src/cli/bench/proxy-report.js";
import { measureProxyOverhead, projectRoot } from "../../../src/cli/bench/proxy-run.js";

/*
 * bench:hop's and bench:proxy's --placement: the CPUs each process may use, read back
 * from /proc while it runs (every thread of a child, the benchmark's own process), and
 * the benchmark's own CPUs given back afterwards.
 */

/** Each thread's Cpus_allowed_list of `pid`. */
const threadCpus = (pid: number): string[] => readdirSync(`/proc/${pid}/task`).map((tid) => cpusAllowedOf(pid, Number(tid)));

/** This process's benchmark children (proxy-server-child.ts) by role, with their threads' CPUs. */
function childrenCpus(): Record<string, string[]> {
  const found: Record<string, string[]> = {};
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      const role = /"role":"([a-z-]+)"/.exec(cmdline)?.[1];
      if (ppid === process.pid && cmdline.includes("proxy-server-child") && role !== undefined) found[role] = [...new Set(threadCpus(Number(entry)))];
    } catch {
      // A process that ended while being read.
    }
  }
  return found;
}

describe("cpuPlanOf", () => {
  it("gives every part the same CPUs whatever the target, and none under free", () => {
    expect(cpuPlanOf("free", [0, 1])).toEqual({});
    expect(cpuPlanOf("proxy-alone", [0, 1])).toEqual({ bench: "0", engine: "0", proxy: "1" });
    expect(cpuPlanOf("engine-alone", [2, 5])).toEqual({ bench: "2", engine: "5", proxy: "2" });
    expect(cpuPlanOf("one-cpu", [3])).toEqual({ bench: "3", engine: "3", proxy: "3" });
    expect(() => cpuPlanOf("proxy-alone", [0])).toThrow("needs two CPUs");
  });

  it("reads a CPU list as taskset and /proc write it", () => {
    expect(cpusOfList("0-1")).toEqual([0, 1]);
    expect(cpusOfList("0,2-4,7")).toEqual([0, 2, 3, 4, 7]);
    expect(() => cpusOfList("1-0")).toThrow("not a CPU list");
    expect(() => cpusOfList("a")).toThrow("not a CPU list");
  });

  it("starts a command under taskset only when it has CPUs", () => {
    expect(commandOnCpus(undefined, "node", ["a.js"])).toEqual({ command: "node", args: ["a.js"] });
    expect(commandOnCpus("1", "node", ["a.js"])).toEqual({ command: "taskset", args: ["-c", "1", "node", "a.js"] });
  });
});

describe.skipIf(availableParallelism() < 2)("placement on this machine", () => {
  it("starts a server process with every thread on the CPUs it was given", { timeout: 30_000 }, async () => {
    const cpu = String(cpusOfList(cpusAllowedOf(process.pid))[1]);
    const engine = await startEngineProcess({ role: "engine" }, { cpus: cpu });
    try {
      expect(cpusAllowedOf(engine.pid)).toBe(cpu);
      const threads = threadCpus(engine.pid);
      expect(threads.length).toBeGreaterThan(1);
      expect(new Set(threads)).toEqual(new Set([cpu]));
    } finally {
      await engine.stop();
    }
  });

  /**
   * Runs a bench under `placement`: where this process and its children run when `at`
   * picks a log line of the run, and the bench's result. Checks that the benchmark has
   * its own CPUs back after.
   */
  async function placedRun<R>(placement: Placement, at: (line: string) => boolean, run: (log: (line: string) => void) => Promise<R>) {
    const before = cpusAllowedOf(process.pid);
    const during: { own: string; children: Record<string, string[]> }[] = [];
    const result = await run((line) => {
      if (at(line)) during.push({ own: cpusAllowedOf(process.pid), children: childrenCpus() });
    });
    expect(cpusAllowedOf(process.pid)).toBe(before);
    return { plan: cpuPlanOf(placement, cpusOfList(before)), during, result };
  }

  // A child inherits the benchmark's own CPUs, so each placement can show only the pinning of a part placed apart from the client: both are run.
  it.each(["proxy-alone", "engine-alone"] as const)(
    "runs bench:hop's processes where --placement %s puts them, then gives the benchmark its CPUs back",
    { timeout: 60_000 },
    async (placement) => {
      const options = parseHopTraceArgs(["--placement", placement, "--targets", "engine,node-proxy,pool", "--modes", "non-streaming", "--calls", "20", "--rounds", "1", "--warmup", "2"], projectRoot);
      if (options === undefined) throw new Error("no options");
      const { plan, during, result: report } = await placedRun(placement, (line) => line.includes("warmed up"), (log) => runHopTrace(options, log));
      expect(during).toEqual([{ own: plan.bench, children: { engine: [plan.engine], "node-proxy": [plan.proxy], pool: [plan.proxy] } }]);
      expect(report).toContain(`placement: ${placement} (client on CPU ${plan.bench}, engine on CPU ${plan.engine}, proxy on CPU ${plan.proxy})`);
      expect(report).toMatch(/^non-streaming\s+\(b\) pool/m);
    },
  );

  it.each(["proxy-alone", "engine-alone"] as const)(
    "runs bench:proxy's load generator, engine and proxies where --placement %s puts them, and says so in the report",
    { timeout: 60_000 },
    async (placement) => {
      const options = parseProxyBenchArgs(
        ["--placement", placement, "--targets", "engine,node-proxy,pool", "--modes", "non-streaming", "--duration", "0.3", "--warmup", "0", "--rounds", "1", "--connections", "1,2", "--moderate", "2"],
        projectRoot,
      );
      if (options === undefined) throw new Error("no options");
      const { plan, during, result: report } = await placedRun(
        placement,
        (line) => line.startsWith("pool core:"),
        (log) => measureProxyOverhead({ ...options, output: undefined }, { log }),
      );
      expect(during).toEqual([{ own: plan.bench, children: { engine: [plan.engine], "node-proxy": [plan.proxy], pool: [plan.proxy] } }]);
      expect(report.cpus).toEqual(plan);
      expect(report.machine.cpus).toBe(cpus().length);
      expect(proxyReportHeader(report)).toContain(`Placement: ${placement} (client on CPU ${plan.bench}, engine on CPU ${plan.engine}, proxy on CPU ${plan.proxy})`);
      expect(summariseProxyReport(report).rows.filter((row) => !row.failed)).toHaveLength(3);
    },
  );

  it("refuses a placement it does not know before starting anything", () => {
    expect(() => parseHopTraceArgs(["--placement", "pool-alone"], projectRoot)).toThrow('--placement takes one of free, proxy-alone, engine-alone, one-cpu; got "pool-alone"');
    expect(() => parseProxyBenchArgs(["--placement", "pool-alone"], projectRoot)).toThrow('--placement takes one of free, proxy-alone, engine-alone, one-cpu; got "pool-alone"');
  });
});
