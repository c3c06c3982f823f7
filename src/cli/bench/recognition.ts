/*
 * `npm run bench:recognition`: program recognition without a header (issue 12) on
 * generated traces of many interleaved agents of one tenant (src/sim/workload/
 * agent-traces.ts), per scenario: each trace is replayed through a ConversationIndex
 * the way the edge does it — at a call's start recognize (undefined: a new program, on
 * thread "main"), recordCall; at its end recordReply or recordFailure — and the
 * assignment is scored against the agents' true programs, next to the "header only"
 * baseline (every call without a header is a new program). Prints tables, or --json.
 */

import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { ConversationIndex, type ConversationIndexOptions, type Recognition } from "../../core/recognition/conversation-index.js";
import { formatTextTable, type HeadlineTable } from "../../sim/report/table.js";
import { type AgentTrace, type AgentTraceOptions, generateAgentTraces, type TruthRelation } from "../../sim/workload/agent-traces.js";
import { addPairCounts, decisions, type How, type PairCounts, pairScores, pairwise } from "./recognition-metrics.js";

export const RECOGNITION_BENCH_USAGE = `bench:recognition [options]   program recognition without a header, on generated agent traces

  --agents N        agents per scenario (default 200; the scale rows use N/4, N and 5N)
  --seed N          trace seed (default 1)
  --max-entries N   the index's maxEntries (default: the recogniser's)
  --ttl-ms N        the index's ttlMs (default: the recogniser's)
  --json            print the results as JSON instead of tables`;

export interface RecognitionBenchOptions {
  agents: number;
  seed: number;
  index: ConversationIndexOptions;
  json: boolean;
}

function positiveInt(flag: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${flag} must be an integer >= 1, got "${raw}"`);
  return value;
}

/** The options, or undefined for --help. */
export function parseRecognitionBenchArgs(argv: readonly string[]): RecognitionBenchOptions | undefined {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      agents: { type: "string" },
      seed: { type: "string" },
      "max-entries": { type: "string" },
      "ttl-ms": { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return undefined;
  const index: ConversationIndexOptions = {};
  if (values["max-entries"] !== undefined) index.maxEntries = positiveInt("max-entries", values["max-entries"], 1);
  if (values["ttl-ms"] !== undefined) index.ttlMs = positiveInt("ttl-ms", values["ttl-ms"], 1);
  return { agents: positiveInt("agents", values.agents, 200), seed: positiveInt("seed", values.seed, 1), index, json: values.json === true };
}

export interface RecognitionScenario {
  name: string;
  /** Left out of "overall (unambiguous)": nothing in the conversation can separate its merged agents. */
  ambiguous: boolean;
  trace: Partial<AgentTraceOptions>;
}

const CLEAN: Partial<AgentTraceOptions> = { failureRate: 0, identicalFirstShare: 0, temperatureZeroShare: 0, reserializingClientShare: 0, outage: undefined };
/** The realistic mix: 30 % tree search, 3 % of calls fail, 20 % of agents on one of 3 shared tasks, a quarter of clients re-serialise. */
const MIXED: Partial<AgentTraceOptions> = { treeSearchShare: 0.3, failureRate: 0.03, identicalFirstShare: 0.2, sharedTasks: 3, temperatureZeroShare: 0, reserializingClientShare: 0.25 };

export function recognitionScenarios(agents: number): RecognitionScenario[] {
  const scaled = (f: number) => Math.max(1, Math.round(agents * f));
  const scenario = (name: string, trace: Partial<AgentTraceOptions>, ambiguous = false): RecognitionScenario => ({ name, ambiguous, trace: { agents, ...trace } });
  return [
    ...[0.25, 1, 5].map((f) => scenario(`mixed, ${scaled(f)} agents`, { ...MIXED, agents: scaled(f) })),
    scenario("coding only", { ...CLEAN, treeSearchShare: 0 }),
    scenario("tree search only", { ...CLEAN, treeSearchShare: 1 }),
    scenario("retries (15 % of calls fail)", { ...CLEAN, failureRate: 0.15 }),
    scenario("identical first messages (60 %, 3 tasks)", { ...CLEAN, identicalFirstShare: 0.6 }),
    scenario("identical first + retries (10 %)", { ...CLEAN, identicalFirstShare: 0.6, failureRate: 0.1 }),
    scenario("identical first + outages (5 s a minute)", { ...CLEAN, identicalFirstShare: 0.6, outage: { periodMs: 60_000, durationMs: 5_000 } }),
    scenario("re-serialising clients", { ...CLEAN, reserializingClientShare: 1 }),
    scenario("temperature-0 first replies (ambiguous)", { ...CLEAN, identicalFirstShare: 0.6, temperatureZeroShare: 1 }, true),
  ];
}

/** What the bench needs of the recogniser (ConversationIndex, or a stand-in in tests). */
export type RecognitionIndex = Pick<ConversationIndex, "recognize" | "recordCall" | "recordReply" | "recordFailure" | "size">;

export interface Replay {
  assigned: string[];
  threads: string[];
  how: How[];
  /** Index entries at the end, and the most at any event. */
  entries: number;
  peakEntries: number;
  elapsedNs: number;
  /** Process CPU time (user + system) over the replay: unlike hrtime, not inflated while other processes hold the CPUs. */
  cpuMicros: number;
}

/** Replays the trace through `index` as the edge would, timing the whole loop with process.hrtime. */
export function replayTrace(trace: AgentTrace, index: RecognitionIndex): Replay {
  const n = trace.calls.length;
  const assigned = new Array<string>(n).fill("");
  const threads = new Array<string>(n).fill("");
  const how = new Array<How>(n).fill("new");
  let programs = 0;
  let peakEntries = 0;
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  for (const event of trace.events) {
    const call = trace.calls[event.call];
    if (call === undefined) continue;
    if (event.type === "start") {
      const found: Recognition = index.recognize(call.model, call.messages, event.time);
      const programId = found?.programId ?? `prog_${++programs}`;
      const thread = found?.thread ?? "main";
      assigned[call.index] = programId;
      threads[call.index] = thread;
      how[call.index] = found?.how ?? "new";
      index.recordCall(call.model, call.messages, programId, thread, event.time);
    } else {
      const programId = assigned[call.index] as string;
      const thread = threads[call.index] as string;
      if (call.reply === undefined) index.recordFailure(call.model, call.messages, programId, thread, event.time);
      else index.recordReply(call.model, call.messages, call.reply, programId, thread, event.time);
    }
    if (index.size > peakEntries) peakEntries = index.size;
  }
  const elapsedNs = Number(process.hrtime.bigint() - started);
  const used = process.cpuUsage(cpu);
  return { assigned, threads, how, entries: index.size, peakEntries, elapsedNs, cpuMicros: used.user + used.system };
}

export interface MethodFigures {
  programs: number;
  precision: number;
  recall: number;
  /** Share of calls whose decision was right (recognition-metrics.ts decisions). */
  accuracy: number;
  correct: number;
  pairs: PairCounts;
}

export interface ErrorGroup {
  truth: TruthRelation;
  recognised: How;
  /** "split": it started a new program; "merged": it joined another agent's program; "own, wrong call": its own program but not its predecessor's assignment. */
  outcome: "split" | "merged" | "own program, not its predecessor's";
  /** The agent's traits (shared task, temperature-0 first reply, re-serialising client). */
  traits: string;
  calls: number;
  /** One such call, for a look with the trace. */
  example: { call: number; agent: number; parent: number | undefined };
}

export interface ScenarioFigures {
  name: string;
  ambiguous: boolean;
  agents: number;
  calls: number;
  truthPrograms: number;
  /** Most calls in flight at once (how much the agents interleave). */
  maxInFlight: number;
  relations: Record<TruthRelation, number>;
  recognition: MethodFigures & { how: Record<How, number>; entries: number; peakEntries: number; microsPerCall: number; cpuMicrosPerCall: number; elapsedNs: number; cpuMicros: number };
  headerOnly: MethodFigures;
  errors: ErrorGroup[];
}

function methodFigures(trace: AgentTrace, assigned: readonly string[], how: readonly How[]): MethodFigures {
  const truth = trace.calls.map((c) => c.programId);
  const { precision, recall, truth: t, assigned: a, both } = pairwise(truth, assigned);
  const correct = decisions(trace, assigned, how).filter(Boolean).length;
  return { programs: new Set(assigned).size, precision, recall, accuracy: correct / Math.max(1, trace.calls.length), correct, pairs: { truth: t, assigned: a, both } };
}

function traitsOf(trace: AgentTrace, agent: number): string {
  const a = trace.agents[agent];
  if (a === undefined) return "-";
  const traits = [...(a.sharedTask === undefined ? [] : ["shared task"]), ...(a.firstReply === "sampled" ? [] : [a.firstReply]), ...(a.reserializes ? ["re-serialising client"] : [])];
  return traits.length === 0 ? "-" : traits.join(", ");
}

function errorGroups(trace: AgentTrace, replay: Replay, right: readonly boolean[]): ErrorGroup[] {
  // The truth program of the call that opened each assigned program.
  const owner = new Map<string, string>();
  trace.calls.forEach((c) => {
    if (replay.how[c.index] === "new") owner.set(replay.assigned[c.index] as string, c.programId);
  });
  const groups = new Map<string, ErrorGroup>();
  for (const call of trace.calls) {
    if (right[call.index]) continue;
    const recognised = replay.how[call.index] as How;
    const outcome: ErrorGroup["outcome"] = recognised === "new" ? "split" : owner.get(replay.assigned[call.index] as string) !== call.programId ? "merged" : "own program, not its predecessor's";
    const traits = traitsOf(trace, call.agent);
    const key = `${call.relation}|${recognised}|${outcome}|${traits}`;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, { truth: call.relation, recognised, outcome, traits, calls: 1, example: { call: call.index, agent: call.agent, parent: call.parent } });
    else group.calls += 1;
  }
  return [...groups.values()].sort((x, y) => y.calls - x.calls);
}

function maxInFlight(trace: AgentTrace): number {
  let now = 0;
  let most = 0;
  for (const e of trace.events) {
    now += e.type === "start" ? 1 : -1;
    if (now > most) most = now;
  }
  return most;
}

function count<K extends string>(keys: readonly K[], values: readonly K[]): Record<K, number> {
  const out = Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
  for (const v of values) out[v] += 1;
  return out;
}

const HOWS: readonly How[] = ["new", "continuation", "fork", "retry"];
const RELATIONS: readonly TruthRelation[] = ["first", "continuation", "fork", "retry"];

export function runScenario(scenario: RecognitionScenario, seed: number, indexOptions: ConversationIndexOptions): ScenarioFigures {
  const trace = generateAgentTraces({ ...scenario.trace, seed });
  // Twice, each on a fresh index: the first pass settles the JIT, the second is timed.
  replayTrace(trace, new ConversationIndex(indexOptions));
  const replay = replayTrace(trace, new ConversationIndex(indexOptions));
  const recognition = methodFigures(trace, replay.assigned, replay.how);
  const right = decisions(trace, replay.assigned, replay.how);
  // Header only: no call carries a header, so each is a program of its own.
  const headerOnly = methodFigures(trace, trace.calls.map((c) => `header_${c.index}`), trace.calls.map((): How => "new"));
  const calls = trace.calls.length;
  return {
    name: scenario.name,
    ambiguous: scenario.ambiguous,
    agents: trace.agents.length,
    calls,
    truthPrograms: new Set(trace.calls.map((c) => c.programId)).size,
    maxInFlight: maxInFlight(trace),
    relations: count(RELATIONS, trace.calls.map((c) => c.relation)),
    recognition: { ...recognition, how: count(HOWS, replay.how), entries: replay.entries, peakEntries: replay.peakEntries, microsPerCall: replay.elapsedNs / 1_000 / Math.max(1, calls), cpuMicrosPerCall: replay.cpuMicros / Math.max(1, calls), elapsedNs: replay.elapsedNs, cpuMicros: replay.cpuMicros },
    headerOnly,
    errors: errorGroups(trace, replay, right),
  };
}

export interface OverallFigures {
  name: string;
  calls: number;
  truthPrograms: number;
  recognition: { programs: number; precision: number; recall: number; accuracy: number; microsPerCall: number; cpuMicrosPerCall: number };
  headerOnly: { programs: number; precision: number; recall: number; accuracy: number };
}

/** Pooled over scenarios: pair counts add (no pair spans two traces), accuracy and time per call weigh by calls. */
export function overall(name: string, of: readonly ScenarioFigures[]): OverallFigures {
  const zero: PairCounts = { truth: 0, assigned: 0, both: 0 };
  const calls = of.reduce((n, s) => n + s.calls, 0);
  const pooled = (pick: (s: ScenarioFigures) => MethodFigures) => {
    const scores = pairScores(of.map((s) => pick(s).pairs).reduce(addPairCounts, zero));
    return { programs: of.reduce((n, s) => n + pick(s).programs, 0), ...scores, accuracy: of.reduce((n, s) => n + pick(s).correct, 0) / Math.max(1, calls) };
  };
  return {
    name,
    calls,
    truthPrograms: of.reduce((n, s) => n + s.truthPrograms, 0),
    recognition: { ...pooled((s) => s.recognition), microsPerCall: of.reduce((n, s) => n + s.recognition.elapsedNs, 0) / 1_000 / Math.max(1, calls), cpuMicrosPerCall: of.reduce((n, s) => n + s.recognition.cpuMicros, 0) / Math.max(1, calls) },
    headerOnly: pooled((s) => s.headerOnly),
  };
}

export interface RecognitionBenchReport {
  command: string;
  seed: number;
  agents: number;
  index: ConversationIndexOptions;
  scenarios: ScenarioFigures[];
  overall: OverallFigures[];
  loadAverage: number[];
}

export function runRecognitionBench(options: RecognitionBenchOptions, argv: readonly string[] = []): RecognitionBenchReport {
  const scenarios = recognitionScenarios(options.agents).map((s) => runScenario(s, options.seed, options.index));
  return {
    command: ["npm run bench:recognition --", ...argv].join(" "),
    seed: options.seed,
    agents: options.agents,
    index: options.index,
    scenarios,
    overall: [overall("overall", scenarios), overall("overall (unambiguous)", scenarios.filter((s) => !s.ambiguous))],
    loadAverage: loadavg(),
  };
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(2)} %` : "-");
const us = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "-");

export function assignmentTable(report: RecognitionBenchReport): HeadlineTable {
  const rows = [
    ...report.scenarios.map((s) => [s.name, String(s.agents), String(s.calls), String(s.truthPrograms), String(s.recognition.programs), pct(s.recognition.precision), pct(s.recognition.recall), pct(s.recognition.accuracy), us(s.recognition.microsPerCall), us(s.recognition.cpuMicrosPerCall), String(s.headerOnly.programs), pct(s.headerOnly.precision), pct(s.headerOnly.recall), pct(s.headerOnly.accuracy)]),
    ...report.overall.map((o) => [o.name, "-", String(o.calls), String(o.truthPrograms), String(o.recognition.programs), pct(o.recognition.precision), pct(o.recognition.recall), pct(o.recognition.accuracy), us(o.recognition.microsPerCall), us(o.recognition.cpuMicrosPerCall), String(o.headerOnly.programs), pct(o.headerOnly.precision), pct(o.headerOnly.recall), pct(o.headerOnly.accuracy)]),
  ];
  return {
    title: "Program assignment: recognition (ConversationIndex) vs header only (every call without a header is a new program); pairwise precision / recall over pairs of calls",
    headers: ["scenario", "agents", "calls", "programs", "assigned", "precision", "recall", "accuracy", "µs/call", "CPU µs/call", "header only: assigned", "precision", "recall", "accuracy"],
    rows,
    footnotes: [
      "accuracy: share of calls decided right — an agent's first call opens a new program, any other joins the program its true predecessor (the call it continues, forks from or retries) was assigned.",
      "µs/call: process.hrtime over the replay (recognize + recordCall + recordReply/Failure, after a warm-up pass) ÷ calls, wall-clock on one thread; CPU µs/call: process.cpuUsage over the same replay (includes GC), not inflated when other processes hold the CPUs.",
    ],
  };
}

export function howTable(report: RecognitionBenchReport): HeadlineTable {
  return {
    title: "How calls relate (truth) and how the index recognised them; interleaving and index size",
    headers: ["scenario", "in flight max", "truth: first", "continuation", "fork", "retry", "recognised: new", "continuation", "fork", "retry", "entries", "peak entries"],
    rows: report.scenarios.map((s) => [
      s.name,
      String(s.maxInFlight),
      ...RELATIONS.map((r) => String(s.relations[r])),
      ...HOWS.map((h) => String(s.recognition.how[h])),
      String(s.recognition.entries),
      String(s.recognition.peakEntries),
    ]),
  };
}

export function errorTable(report: RecognitionBenchReport): HeadlineTable {
  const rows = report.scenarios.flatMap((s) => s.errors.map((e) => [s.name, `${e.truth} → ${e.recognised}`, e.outcome, e.traits, String(e.calls), `call ${e.example.call} (agent ${e.example.agent}${e.example.parent === undefined ? "" : `, predecessor ${e.example.parent}`})`]));
  return { title: "Wrong decisions, by case: true relation → how recognised, the outcome, the agents' traits", headers: ["scenario", "truth → recognised", "outcome", "agent traits", "calls", "example"], rows };
}

export function formatRecognitionReport(report: RecognitionBenchReport): string {
  const index = Object.keys(report.index).length === 0 ? "the recogniser's defaults" : Object.entries(report.index).map(([k, v]) => `${k} ${String(v)}`).join(", ");
  const lines = [
    `Program recognition without a header: generated traces of interleaved agents of one tenant (seed ${report.seed}; ConversationIndex with ${index}).`,
    `Load average ${report.loadAverage.map((l) => l.toFixed(2)).join(" / ")} (1 / 5 / 15 min) at the end.`,
    "",
    formatTextTable(assignmentTable(report)),
    formatTextTable(howTable(report)),
  ];
  const errors = errorTable(report);
  lines.push(errors.rows.length === 0 ? "No wrong decisions." : formatTextTable(errors));
  return `${lines.join("\n")}\n`;
}
