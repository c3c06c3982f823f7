import { readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { POOL_PATHS } from "../../protocol/signing.js";
import { newProgramId, newTenantId, randomToken } from "../../protocol/ids.js";
import { loadAverageNow } from "./bench-machine.js";
import { listOf, oneOf, positiveInt } from "./flag-values.js";
import { breakDownWindows, formatPhaseBreakdown, type HopWindow } from "./hop-profile.js";
import { type HopFigures, type HopTarget, runInterleaved, TargetRound } from "./hop-round.js";
import { startHopTap } from "./hop-tap.js";
import { type CpuPlan, placementHelp, PLACEMENTS, type Placement, placementLine, underPlacement } from "./placement.js";
import { CpuProfile } from "./profile-summary.js";
import { PROXY_MODES, type ProxyMode } from "./proxy-options.js";
import { median } from "./proxy-report.js";
import { startEngineProcess, startNodeProxyProcess, startPoolProcess } from "./proxy-server-process.js";
import { SignedRequestStock } from "./proxy-signed-requests.js";
import { CHAT_PATH } from "./proxy-targets.js";
import { chatRequestBody, completionVerifier } from "./proxy-workload.js";
import { sourceTreeOf } from "./source-tree.js";

/*
 * `npm run bench:hop`: where one call's time goes at one connection, on the wire. Each
 * target (the engine direct, the bare node:http proxy, the pool core, a baseline pool
 * core) reaches the same zero-time simulated engine through its own TCP tap
 * (hop-tap.ts); a raw-socket client (hop-client.ts) sends calls one after another. Per
 * call, all on the machine's monotonic clock:
 *
 *   in   the client's write → the engine request's first byte at the tap
 *   out  the engine's last byte at the tap → the client's last byte
 *
 * The engine direct's in and out are the floor (loopback, the kernel waking a process);
 * a proxy's added in and out are its own hops, before and after the engine. Within a
 * round the targets take turns a slice of calls at a time (hop-round.ts), so the
 * machine's drift falls on all of them alike. CPU per call is the target process's
 * own (/proc/<pid>/stat; the engine's for the engine direct): at one connection nearly
 * all of a proxy's work per call is on the call's path, before or after the engine.
 * The engine's preemptions per call show a proxy's CPU taking the engine's: on a
 * 2-core machine the engine, the client and the proxy share. With --cpu-profile DIR the pool core
 * (b) runs under `node --cpu-prof` at a fine interval, and its samples are cut to the
 * calls' windows (hop-profile.ts): what it did, or waited for, in each.
 */

export const HOP_TARGETS = ["engine", "node-proxy", "pool"] as const;
type HopTargetName = (typeof HOP_TARGETS)[number] | "pool-baseline";

export const HOP_TRACE_USAGE = `npm run bench:hop -- [options]   one call's time at one connection, on the wire

  --targets LIST        of engine,node-proxy,pool (default all)
  --modes LIST          of non-streaming,streaming (default both)
  --calls N             calls per target, mode and round (default 2000)
  --slice N             calls a target makes before the next target's turn (default 250)
  --rounds N            rounds; medians reported (default 3)
  --warmup N            unmeasured calls per target and mode first (default 1500)
  --max-tokens N        completion tokens per call (default 16)
  --baseline-pool DIR|REV  also trace the pool core of another checkout or git revision as (b0)
  --pool-tree DIR|REV   trace (b) from that checkout or revision instead of this one
  --cpu-profile DIR     run the pool core (b) under node --cpu-prof into DIR and break its
                        in and out windows down by function
  --profile-interval N  the profile's sampling interval, µs (default 25)
  --top N               rows of each breakdown (default 14)
  --placement NAME      where the processes run, the same for every target:
                        ${placementHelp("                        ")}`;

export interface HopTraceOptions {
  targets: HopTargetName[];
  modes: ProxyMode[];
  calls: number;
  slice: number;
  rounds: number;
  warmup: number;
  maxTokens: number;
  baselinePoolTree: string | undefined;
  poolTree: string | undefined;
  cpuProfileDir: string | undefined;
  profileIntervalUs: number;
  top: number;
  placement: Placement;
}

export function parseHopTraceArgs(argv: string[], root: string): HopTraceOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      targets: { type: "string" },
      modes: { type: "string" },
      calls: { type: "string" },
      slice: { type: "string" },
      rounds: { type: "string" },
      warmup: { type: "string" },
      "max-tokens": { type: "string" },
      "baseline-pool": { type: "string" },
      "pool-tree": { type: "string" },
      "cpu-profile": { type: "string" },
      "profile-interval": { type: "string" },
      top: { type: "string" },
      placement: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return undefined;
  const baselinePoolTree = values["baseline-pool"] === undefined ? undefined : sourceTreeOf(values["baseline-pool"], root);
  const targets: HopTargetName[] = listOf("targets", values.targets, HOP_TARGETS);
  if (baselinePoolTree !== undefined) targets.splice(targets.indexOf("pool") === -1 ? targets.length : targets.indexOf("pool"), 0, "pool-baseline");
  return {
    targets,
    modes: listOf("modes", values.modes, PROXY_MODES),
    calls: positiveInt("calls", values.calls, 2000, 1_000_000),
    slice: positiveInt("slice", values.slice, 250, 1_000_000),
    rounds: positiveInt("rounds", values.rounds, 3, 100),
    warmup: values.warmup === "0" ? 0 : positiveInt("warmup", values.warmup, 1500, 1_000_000),
    maxTokens: positiveInt("max-tokens", values["max-tokens"], 16, 4096),
    baselinePoolTree,
    poolTree: values["pool-tree"] === undefined ? undefined : sourceTreeOf(values["pool-tree"], root),
    cpuProfileDir: values["cpu-profile"] === undefined ? undefined : path.resolve(process.cwd(), values["cpu-profile"]),
    profileIntervalUs: positiveInt("profile-interval", values["profile-interval"], 25, 100_000),
    top: positiveInt("top", values.top, 14, 1000),
    placement: oneOf("placement", values.placement, PLACEMENTS, "free"),
  };
}

const LABELS: Record<HopTargetName, string> = {
  engine: "(a) engine",
  "node-proxy": "(n) node proxy",
  "pool-baseline": "(b0) pool before",
  pool: "(b) pool",
};

interface Target extends HopTarget {
  name: HopTargetName;
}

/** One target's figures in one mode and round. */
interface Block extends HopFigures {
  target: HopTargetName;
  mode: ProxyMode;
}

const unsigned = async () => () => ({});

/** The pool's main-thread profile, written by node --cpu-prof when it exits (CPU.<date>.<time>.<pid>.<thread 0>.<seq>). */
async function profileOf(dir: string, pid: number): Promise<CpuProfile> {
  const file = (await readdir(dir)).filter((name) => name.endsWith(".cpuprofile") && name.includes(`.${pid}.0.`)).sort().pop();
  if (file === undefined) throw new Error(`no CPU profile of process ${pid} in ${dir}`);
  return CpuProfile.parse(JSON.parse(await readFile(path.join(dir, file), "utf8")));
}

export function runHopTrace(options: HopTraceOptions, log: (line: string) => void): Promise<string> {
  return underPlacement(options.placement, (cpus) => traceHops(options, cpus, log));
}

async function traceHops(options: HopTraceOptions, cpus: CpuPlan, log: (line: string) => void): Promise<string> {
  const stops: (() => Promise<void>)[] = [];
  const startLoad = loadAverageNow();
  const out: string[] = [];
  try {
    const engine = await startEngineProcess({ role: "engine" }, { cpus: cpus.engine });
    stops.push(engine.stop);
    const targets: Target[] = [];
    for (const name of options.targets) {
      const tap = await startHopTap(engine.ready.url, CHAT_PATH);
      stops.push(() => tap.close());
      if (name === "engine") {
        targets.push({ name, url: `${tap.url}${CHAT_PATH}`, tap, prepare: unsigned, pid: engine.pid });
      } else if (name === "node-proxy") {
        const proxy = await startNodeProxyProcess({ role: "node-proxy", engineUrl: tap.url }, { cpus: cpus.proxy });
        stops.push(proxy.stop);
        targets.push({ name, url: `${proxy.ready.url}${CHAT_PATH}`, tap, prepare: unsigned, pid: proxy.pid });
      } else {
        const signingKey = { id: "bench-1", secret: randomToken(48) };
        const profiled = name === "pool" && options.cpuProfileDir !== undefined;
        const pool = await startPoolProcess(
          { role: "pool", engineUrl: tap.url, signingKey, engineInFlight: 16, timestampWindowMs: 600_000, replayCapacity: 2_000_000 },
          {
            sourceTree: name === "pool" ? options.poolTree : options.baselinePoolTree,
            cpus: cpus.proxy,
            ...(profiled ? { cpuProfileDir: options.cpuProfileDir, cpuProfileIntervalUs: options.profileIntervalUs } : {}),
          },
        );
        stops.push(pool.stop);
        const identity = { tenant: newTenantId(), programs: [newProgramId()], thread: "main" };
        targets.push({
          name,
          url: `${pool.ready.url}${POOL_PATHS.chatCompletions}`,
          tap,
          pid: pool.pid,
          async prepare(count, body) {
            const stock = new SignedRequestStock(signingKey, body, identity);
            await stock.fill(count);
            return () => stock.take();
          },
        });
      }
      log(`${LABELS[name]} ready`);
    }

    const blocks: Block[] = [];
    const windows = new Map<ProxyMode, HopWindow[]>(options.modes.map((mode) => [mode, []]));
    const open = (target: Target, mode: ProxyMode, count: number) => {
      const workload = { model: engine.ready.model, mode, maxTokens: options.maxTokens };
      const run = { mode, body: chatRequestBody(workload), count, check: completionVerifier(workload), enginePid: engine.pid };
      return TargetRound.open(target, LABELS[target.name], run);
    };
    if (options.warmup > 0) {
      for (const mode of options.modes) {
        for (const target of targets) await runInterleaved([await open(target, mode, options.warmup)], options.warmup, 0, () => undefined);
        log(`${mode}: warmed up`);
      }
    }
    for (let round = 0; round < options.rounds; round++) {
      for (const mode of options.modes) {
        const rounds = new Map<TargetRound, Target>();
        for (const target of targets) rounds.set(await open(target, mode, options.calls), target);
        const traced = (one: TargetRound) => (rounds.get(one)?.name === "pool" && options.cpuProfileDir !== undefined ? windows.get(mode) : undefined);
        await runInterleaved([...rounds.keys()], options.slice, round, traced);
        for (const [one, target] of rounds) blocks.push({ target: target.name, mode, ...one.figures() });
        log(`round ${round + 1}/${options.rounds} ${mode}: done (load ${loadAverageNow()})`);
      }
    }
    out.push(formatHopTable(blocks, options), "", `placement: ${placementLine(options.placement, cpus)}; 1-min load average ${startLoad} → ${loadAverageNow()}`);

    const profiled = targets.find((target) => target.name === "pool" && target.pid !== undefined);
    if (options.cpuProfileDir !== undefined && profiled?.pid !== undefined) {
      // The profile is written when the pool exits.
      for (const stop of stops.splice(0).reverse()) await stop();
      const profile = await profileOf(options.cpuProfileDir, profiled.pid);
      // Beside the profile, for another look at the same calls.
      await writeFile(path.join(options.cpuProfileDir, `hop-windows.${profiled.pid}.json`), JSON.stringify(Object.fromEntries(windows)));
      for (const mode of options.modes) {
        const modeWindows = (windows.get(mode) ?? []).sort((a, b) => a.startUs - b.startUs);
        out.push("", `(b) pool, ${mode}, CPU profile at ${options.profileIntervalUs} µs (its sampling slows the pool; read shares, not totals):`);
        for (const breakdown of breakDownWindows(profile, modeWindows, options.top)) out.push(formatPhaseBreakdown(breakdown));
      }
    }
    return out.join("\n");
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
}

/** Medians over rounds; "+" columns: the median of each round's difference from the engine direct in that round. */
export function formatHopTable(blocks: readonly Block[], options: Pick<HopTraceOptions, "calls" | "slice" | "rounds" | "modes" | "targets">): string {
  const header = ["mode", "target", "in p50", "out p50", "total p50", "total p99", "+in", "+out", "+total", "+total (rounds)", "cpu µs/call", "engine preempted/call"];
  const rows: string[][] = [];
  for (const mode of options.modes) {
    const engineBlocks = blocks.filter((b) => b.mode === mode && b.target === "engine");
    for (const name of options.targets) {
      const own = blocks.filter((b) => b.mode === mode && b.target === name);
      if (own.length === 0) continue;
      const added = (field: "inP50" | "outP50" | "totalP50") =>
        own.map((b, i) => b[field] - (engineBlocks[i]?.[field] ?? Number.NaN));
      const plus = (values: number[]) => (name === "engine" || engineBlocks.length === 0 ? "—" : `+${median(values).toFixed(0)}`);
      const totals = added("totalP50");
      rows.push([
        mode,
        LABELS[name],
        median(own.map((b) => b.inP50)).toFixed(0),
        median(own.map((b) => b.outP50)).toFixed(0),
        median(own.map((b) => b.totalP50)).toFixed(0),
        median(own.map((b) => b.totalP99)).toFixed(0),
        plus(added("inP50")),
        plus(added("outP50")),
        plus(totals),
        name === "engine" || engineBlocks.length === 0 ? "—" : totals.map((v) => v.toFixed(0)).join(" "),
        median(own.map((b) => b.cpuUs)).toFixed(0),
        median(own.map((b) => b.enginePreemptions)).toFixed(2),
      ]);
    }
  }
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const line = (cells: string[]) => cells.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join("  ");
  return [
    `µs per call at one connection, ${options.calls} calls per target, mode and round (the targets taking turns ${options.slice} calls at a time), ${options.rounds} rounds (medians of each round's p50):`,
    "in: the client's write → the engine request's first byte; out: the engine's last byte → the client's last byte",
    line(header),
    ...rows.map(line),
  ].join("\n");
}
