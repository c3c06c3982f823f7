import { readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { POOL_PATHS } from "../../protocol/signing.js";
import { newProgramId, newTenantId, randomToken } from "../../protocol/ids.js";
import { loadAverageNow } from "./bench-machine.js";
import { listOf, positiveInt } from "./flag-values.js";
import { HopConnection, postBytes } from "./hop-client.js";
import { breakDownWindows, formatPhaseBreakdown, type HopWindow } from "./hop-profile.js";
import { type HopTap, startHopTap } from "./hop-tap.js";
import { CpuProfile } from "./profile-summary.js";
import { processCpuMs } from "./relay-cpu.js";
import { PROXY_MODES, type ProxyMode } from "./proxy-options.js";
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
 * a proxy's added in and out are its own hops, before and after the engine. Rounds
 * alternate the targets' order, as bench:proxy's. CPU per call is the target process's
 * own (/proc/<pid>/stat; the engine's for the engine direct): at one connection nearly
 * all of a proxy's work per call is on the call's path, before or after the engine. With --cpu-profile DIR the pool core
 * (b) runs under `node --cpu-prof` at a fine interval, and its samples are cut to the
 * calls' windows (hop-profile.ts): what it did, or waited for, in each.
 */

export const HOP_TARGETS = ["engine", "node-proxy", "pool"] as const;
type HopTargetName = (typeof HOP_TARGETS)[number] | "pool-baseline";

export const HOP_TRACE_USAGE = `npm run bench:hop -- [options]   one call's time at one connection, on the wire

  --targets LIST        of engine,node-proxy,pool (default all)
  --modes LIST          of non-streaming,streaming (default both)
  --calls N             calls per target, mode and round (default 2000)
  --rounds N            rounds, targets in alternating order; medians reported (default 3)
  --warmup N            unmeasured calls per target and mode first (default 1500)
  --max-tokens N        completion tokens per call (default 16)
  --baseline-pool DIR|REV  also trace the pool core of another checkout or git revision as (b0)
  --pool-tree DIR|REV   trace (b) from that checkout or revision instead of this one
  --cpu-profile DIR     run the pool core (b) under node --cpu-prof into DIR and break its
                        in and out windows down by function
  --profile-interval N  the profile's sampling interval, µs (default 25)
  --top N               rows of each breakdown (default 14)`;

export interface HopTraceOptions {
  targets: HopTargetName[];
  modes: ProxyMode[];
  calls: number;
  rounds: number;
  warmup: number;
  maxTokens: number;
  baselinePoolTree: string | undefined;
  poolTree: string | undefined;
  cpuProfileDir: string | undefined;
  profileIntervalUs: number;
  top: number;
}

export function parseHopTraceArgs(argv: string[], root: string): HopTraceOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      targets: { type: "string" },
      modes: { type: "string" },
      calls: { type: "string" },
      rounds: { type: "string" },
      warmup: { type: "string" },
      "max-tokens": { type: "string" },
      "baseline-pool": { type: "string" },
      "pool-tree": { type: "string" },
      "cpu-profile": { type: "string" },
      "profile-interval": { type: "string" },
      top: { type: "string" },
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
    rounds: positiveInt("rounds", values.rounds, 3, 100),
    warmup: values.warmup === "0" ? 0 : positiveInt("warmup", values.warmup, 1500, 1_000_000),
    maxTokens: positiveInt("max-tokens", values["max-tokens"], 16, 4096),
    baselinePoolTree,
    poolTree: values["pool-tree"] === undefined ? undefined : sourceTreeOf(values["pool-tree"], root),
    cpuProfileDir: values["cpu-profile"] === undefined ? undefined : path.resolve(process.cwd(), values["cpu-profile"]),
    profileIntervalUs: positiveInt("profile-interval", values["profile-interval"], 25, 100_000),
    top: positiveInt("top", values.top, 14, 1000),
  };
}

const LABELS: Record<HopTargetName, string> = {
  engine: "(a) engine",
  "node-proxy": "(n) node proxy",
  "pool-baseline": "(b0) pool before",
  pool: "(b) pool",
};

interface Target {
  name: HopTargetName;
  url: string;
  tap: HopTap;
  /** Headers of the next call (the pools: a fresh edge signature each). */
  prepare(count: number, body: string): Promise<() => Record<string, string>>;
  pid?: number;
}

/** One block of calls' figures, µs. */
interface Block {
  target: HopTargetName;
  mode: ProxyMode;
  inP50: number;
  outP50: number;
  totalP50: number;
  totalP99: number;
  /** CPU µs per call of the target's own process (the engine's for the engine direct); NaN when not read. */
  cpuUs: number;
}

const quantile = (sorted: Float64Array, q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

/** Runs `count` calls one after another; each answer must be a complete completion. */
async function runCalls(
  target: Target,
  mode: ProxyMode,
  body: string,
  count: number,
  check: (body: string) => boolean,
  windows: HopWindow[] | undefined,
): Promise<Omit<Block, "target" | "mode">> {
  const cpuPid = target.pid;
  const headersOf = await target.prepare(count, body);
  const requests = Array.from({ length: count }, () => postBytes(target.url, { "content-type": "application/json", ...headersOf() }, body));
  const inUs = new Float64Array(count);
  const outUs = new Float64Array(count);
  const totalUs = new Float64Array(count);
  const connection = await HopConnection.open(target.url);
  const cpuBefore = cpuPid === undefined ? undefined : processCpuMs(cpuPid);
  try {
    for (let i = 0; i < count; i++) {
      target.tap.reset();
      const answer = await connection.exchange(requests[i] as Buffer);
      const { requestFirstByteNs: firstNs, answerLastByteNs: lastNs } = target.tap;
      if (answer.status !== 200 || !check(answer.body)) {
        throw new Error(`${LABELS[target.name]} ${mode}: not a complete completion (status ${answer.status}): ${answer.body.slice(0, 300)}`);
      }
      if (firstNs === undefined || lastNs === undefined) throw new Error(`${LABELS[target.name]}: the call did not cross its tap`);
      inUs[i] = Number(firstNs - answer.sentNs) / 1_000;
      outUs[i] = Number(answer.answeredNs - lastNs) / 1_000;
      totalUs[i] = Number(answer.answeredNs - answer.sentNs) / 1_000;
      if (windows !== undefined) {
        windows.push({ phase: "in", startUs: Number(answer.sentNs / 1_000n), endUs: Number(firstNs / 1_000n) });
        windows.push({ phase: "out", startUs: Number(lastNs / 1_000n), endUs: Number(answer.answeredNs / 1_000n) });
      }
    }
  } finally {
    connection.close();
  }
  const cpuAfter = cpuPid === undefined ? undefined : processCpuMs(cpuPid);
  const cpuUs = cpuBefore === undefined || cpuAfter === undefined ? Number.NaN : ((cpuAfter - cpuBefore) * 1_000) / count;
  for (const values of [inUs, outUs, totalUs]) values.sort();
  return { inP50: quantile(inUs, 0.5), outP50: quantile(outUs, 0.5), totalP50: quantile(totalUs, 0.5), totalP99: quantile(totalUs, 0.99), cpuUs };
}

const unsigned = async () => () => ({});

/** The pool's main-thread profile, written by node --cpu-prof when it exits (CPU.<date>.<time>.<pid>.<thread 0>.<seq>). */
async function profileOf(dir: string, pid: number): Promise<CpuProfile> {
  const file = (await readdir(dir)).filter((name) => name.endsWith(".cpuprofile") && name.includes(`.${pid}.0.`)).sort().pop();
  if (file === undefined) throw new Error(`no CPU profile of process ${pid} in ${dir}`);
  return CpuProfile.parse(JSON.parse(await readFile(path.join(dir, file), "utf8")));
}

export async function runHopTrace(options: HopTraceOptions, log: (line: string) => void): Promise<string> {
  const stops: (() => Promise<void>)[] = [];
  const startLoad = loadAverageNow();
  const out: string[] = [];
  try {
    const engine = await startEngineProcess({ role: "engine" });
    stops.push(engine.stop);
    const targets: Target[] = [];
    for (const name of options.targets) {
      const tap = await startHopTap(engine.ready.url, CHAT_PATH);
      stops.push(() => tap.close());
      if (name === "engine") {
        targets.push({ name, url: `${tap.url}${CHAT_PATH}`, tap, prepare: unsigned, pid: engine.pid });
      } else if (name === "node-proxy") {
        const proxy = await startNodeProxyProcess({ role: "node-proxy", engineUrl: tap.url });
        stops.push(proxy.stop);
        targets.push({ name, url: `${proxy.ready.url}${CHAT_PATH}`, tap, prepare: unsigned, pid: proxy.pid });
      } else {
        const signingKey = { id: "bench-1", secret: randomToken(48) };
        const profiled = name === "pool" && options.cpuProfileDir !== undefined;
        const pool = await startPoolProcess(
          { role: "pool", engineUrl: tap.url, signingKey, engineInFlight: 16, timestampWindowMs: 600_000, replayCapacity: 2_000_000 },
          {
            sourceTree: name === "pool" ? options.poolTree : options.baselinePoolTree,
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
    for (const mode of options.modes) {
      const workload = { model: engine.ready.model, mode, maxTokens: options.maxTokens };
      const body = chatRequestBody(workload);
      const check = completionVerifier(workload);
      if (options.warmup > 0) {
        for (const target of targets) await runCalls(target, mode, body, options.warmup, check, undefined);
        log(`${mode}: warmed up`);
      }
    }
    for (let round = 0; round < options.rounds; round++) {
      for (const mode of options.modes) {
        const workload = { model: engine.ready.model, mode, maxTokens: options.maxTokens };
        const body = chatRequestBody(workload);
        const check = completionVerifier(workload);
        const order = round % 2 === 0 ? targets : [...targets].reverse();
        for (const target of order) {
          const traced = target.name === "pool" && options.cpuProfileDir !== undefined ? windows.get(mode) : undefined;
          blocks.push({ target: target.name, mode, ...(await runCalls(target, mode, body, options.calls, check, traced)) });
        }
        log(`round ${round + 1}/${options.rounds} ${mode}: done (load ${loadAverageNow()})`);
      }
    }
    out.push(formatHopTable(blocks, options), "", `1-min load average ${startLoad} → ${loadAverageNow()}`);

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
export function formatHopTable(blocks: readonly Block[], options: Pick<HopTraceOptions, "calls" | "rounds" | "modes" | "targets">): string {
  const header = ["mode", "target", "in p50", "out p50", "total p50", "total p99", "+in", "+out", "+total", "+total (rounds)", "cpu µs/call"];
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
      ]);
    }
  }
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const line = (cells: string[]) => cells.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join("  ");
  return [
    `µs per call at one connection, ${options.calls} calls per target, mode and round, ${options.rounds} rounds (medians of each round's p50):`,
    "in: the client's write → the engine request's first byte; out: the engine's last byte → the client's last byte",
    line(header),
    ...rows.map(line),
  ].join("\n");
}
