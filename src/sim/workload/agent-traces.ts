/*
 * Interleaved call traces of many agents of one tenant, none sending a program header,
 * for benchmarking program recognition (issue 12, `npm run bench:recognition`). Pure
 * and seeded: the same options and seed give the same trace.
 *
 * Each agent is one program with a ground-truth program ID. Every call carries its
 * arrival time, model, chat messages as the client sends them and their canonical form
 * (the recogniser's `canonicalMessage`), when it ends, whether it fails, the reply the
 * engine gave (canonical), and how it truly relates to the agent's earlier calls:
 *
 * - coding agents: a sequential loop. A system prompt shared by every agent of the
 *   trace, a first user message (a share of agents draw it from a few shared tasks:
 *   identical first calls across agents), then 5–40 steps of assistant reply with 1–3
 *   tool calls → tool results → next call, ending in a text answer;
 * - tree-search agents: a root call, then a node's conversation is expanded into 2–5
 *   children run in parallel. Either each child appends a different user continuation
 *   to the node's conversation (messages + reply), or each appends a different
 *   assistant reply (the node call's other choices, n > 1, of which the edge saw only
 *   the first; one child may keep the reply the edge saw) and the same "evaluate" user
 *   turn. The second kind is used only below the root, so every fork shares a prefix
 *   with an earlier call of its program that ends in an assistant message; 1–2
 *   children of a level are expanded again, to depth 2 or 3;
 * - retries: any call fails with `failureRate` (a fast 5xx/429, a timeout, a client
 *   cancel) and is re-sent, after a backoff, with identical messages; the third
 *   re-send always succeeds. With `outage`, every attempt that starts inside the
 *   outage window (`durationMs` of each `periodMs`) fails fast as well: correlated
 *   failures, so agents with identical first calls fail and re-send together;
 * - temperature-0 duplicates (the ambiguous case, `temperatureZeroShare` of the agents
 *   with a shared task): the first reply is a function of the task alone, so agents
 *   with the same task send identical second calls. "t0-text": a plan without tool
 *   calls, then the same "Proceed." — nothing in the conversation tells the agents
 *   apart; "t0-tool" (coding only): the same first tool call and the same result,
 *   told apart only by the engine's tool-call IDs (which the canonical form drops);
 * - re-serialising clients (`reserializingClientShare`): the client replays the
 *   assistant message in its own shape — arguments re-serialised with Python's
 *   separators, `content: null` as "", tool-call IDs rewritten — so the replayed
 *   canonical message equals the reply's only if the canonical form normalises them.
 *
 * Agents start uniformly over `arrivalWindowMs` and run concurrently; each agent's
 * timeline (model time per call, tool time, backoff) comes from its own random stream,
 * and the trace's events are every call's start and end, in time order.
 */

import { canonicalMessage } from "../../core/recognition/conversation-index.js";
import { deriveSeed, hashString, Rng } from "./prng.js";

export type TraceAgentKind = "coding" | "tree-search";
/** How the agent's first reply came about: sampled, or a function of the task (temperature 0). */
export type FirstReply = "sampled" | "t0-text" | "t0-tool";
/** How a call truly relates to its program's earlier calls. */
export type TruthRelation = "first" | "continuation" | "fork" | "retry";

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string | null;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
}

export interface TraceCall {
  /** Position in `AgentTrace.calls` (calls are in start order). */
  readonly index: number;
  readonly agent: number;
  readonly kind: TraceAgentKind;
  /** Ground truth: the agent's program. */
  readonly programId: string;
  readonly model: string;
  /** Arrival at the edge, ms. */
  readonly start: number;
  /** When the reply (or the failure) is known, ms. */
  readonly end: number;
  /** The messages as the client sends them. */
  readonly chat: readonly ChatMessage[];
  /** `canonicalMessage` of each of `chat`. */
  readonly messages: readonly string[];
  readonly fails: boolean;
  /** The engine's answer (canonical); undefined when the call fails. */
  readonly reply: string | undefined;
  readonly replyChat: ChatMessage | undefined;
  readonly relation: TruthRelation;
  /** The call this one continues, forks from or retries (undefined for "first"). */
  readonly parent: number | undefined;
  /** Forks: the earlier call of the program whose conversation (messages + reply) this one shares a prefix with and leaves. */
  readonly divergesFrom: number | undefined;
}

export interface TraceAgent {
  readonly index: number;
  readonly programId: string;
  readonly kind: TraceAgentKind;
  readonly model: string;
  readonly start: number;
  /** Index of the shared task its first user message is, if any. */
  readonly sharedTask: number | undefined;
  readonly firstReply: FirstReply;
  readonly reserializes: boolean;
  /** Its calls' indices, in start order. */
  readonly calls: readonly number[];
}

export interface TraceEvent {
  readonly time: number;
  readonly type: "start" | "end";
  readonly call: number;
}

export interface AgentTraceOptions {
  agents: number;
  seed: number;
  /** Share of agents that are tree-search agents; the rest are coding agents. */
  treeSearchShare: number;
  /** Probability that one attempt of a call fails. */
  failureRate: number;
  /** Share of agents whose first user message is one of `sharedTasks` tasks. */
  identicalFirstShare: number;
  sharedTasks: number;
  /** Of the agents with a shared task, the share whose first reply is a function of the task. */
  temperatureZeroShare: number;
  /** Share of agents whose client replays assistant messages in its own shape. */
  reserializingClientShare: number;
  /** Agents start uniformly over this window (ms). */
  arrivalWindowMs: number;
  models: readonly string[];
  /** Every attempt starting in the first `durationMs` of each `periodMs` fails fast (an engine outage, 503). */
  outage: { periodMs: number; durationMs: number } | undefined;
}

export const DEFAULT_AGENT_TRACE_OPTIONS: AgentTraceOptions = {
  agents: 200,
  seed: 1,
  treeSearchShare: 0.3,
  failureRate: 0.03,
  identicalFirstShare: 0.2,
  sharedTasks: 3,
  temperatureZeroShare: 0,
  reserializingClientShare: 0,
  arrivalWindowMs: 5 * 60_000,
  models: ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-Coder-7B-Instruct"],
  outage: undefined,
};

export interface AgentTrace {
  readonly options: AgentTraceOptions;
  readonly agents: readonly TraceAgent[];
  readonly calls: readonly TraceCall[];
  /** Every call's start and end, by time (an end before a start at the same instant). */
  readonly events: readonly TraceEvent[];
}

/** The system prompt every agent of a trace sends. */
export const SHARED_SYSTEM_PROMPT =
  "You are an autonomous software agent working in a sandboxed repository. Use the tools to inspect files, run commands and edit code. Think step by step, keep changes minimal, and stop when the task is done.";
/** The user turn after a temperature-0 plan. */
export const PROCEED = "Proceed.";
/** The user turn after each alternative assistant reply of a tree-search expansion. */
export const EVALUATE = "Evaluate this step. If it is promising, continue from it; otherwise say why it fails.";

const MAX_ATTEMPTS = 4;
const TOOLS = ["read_file", "grep", "run_tests", "edit_file", "list_dir", "bash"] as const;

// prettier-ignore
const WORDS = [
  "parser", "cache", "token", "buffer", "router", "handler", "schema", "config", "session", "index", "queue", "worker",
  "stream", "engine", "client", "server", "request", "response", "payload", "header", "module", "helper", "adapter", "driver",
  "metric", "ledger", "budget", "limit", "retry", "timeout", "socket", "vector", "matrix", "graph", "node", "edge", "thread",
  "branch", "commit", "review", "test", "fixture", "mock", "assert", "error", "warning", "panic", "signal", "lock", "mutex",
  "future", "promise", "callback", "event", "listener", "filter", "mapper", "reducer", "store", "view", "model", "render",
  "layout", "style", "theme", "widget", "button", "form", "field", "input", "output", "format", "encode", "decode", "hash",
  "digest", "sign", "verify", "key", "secret", "token", "scope", "role", "tenant", "account", "invoice", "order", "cart",
  "price", "currency", "tax", "report", "export", "import", "upload", "download", "archive", "backup", "restore", "migrate",
  "seed", "shard", "replica", "leader", "follower", "quorum", "vote", "term", "epoch", "window", "batch", "chunk", "page",
  "cursor", "offset", "range", "slice", "merge", "split", "sort", "search", "match", "regex", "glob", "path", "file", "dir",
];

function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[rng.int(items.length)] as T;
}

function words(rng: Rng, n: number): string {
  return Array.from({ length: n }, () => pick(rng, WORDS)).join(" ");
}

function between(rng: Rng, min: number, max: number): number {
  return min + (max - min) * rng.next();
}

/** Lognormal with this median and sigma, clamped to [min, max]. */
function lognormal(rng: Rng, median: number, sigma: number, min: number, max: number): number {
  const u1 = rng.nextOpen();
  const u2 = rng.next();
  const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  return Math.min(max, Math.max(min, median * Math.exp(sigma * z)));
}

function callId(rng: Rng): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  let id = "call_";
  for (let i = 0; i < 24; i++) id += alphabet[rng.int(alphabet.length)];
  return id;
}

function toolArguments(rng: Rng, name: (typeof TOOLS)[number]): Record<string, unknown> {
  const file = `src/${pick(rng, WORDS)}/${pick(rng, WORDS)}.ts`;
  switch (name) {
    case "read_file":
      return { path: file, start_line: 1 + rng.int(200), end_line: 201 + rng.int(200) };
    case "grep":
      return { pattern: `${pick(rng, WORDS)}${pick(rng, WORDS)}`, path: "src", ignore_case: rng.next() < 0.5 };
    case "run_tests":
      return { filter: `${pick(rng, WORDS)}.test.ts`, bail: true };
    case "edit_file":
      return { path: file, old: words(rng, 4), new: words(rng, 5) };
    case "list_dir":
      return { path: `src/${pick(rng, WORDS)}` };
    case "bash":
      return { cmd: `npx tsc --noEmit && git diff --stat -- src/${pick(rng, WORDS)}` };
  }
}

function toolCall(rng: Rng, name: (typeof TOOLS)[number], args: Record<string, unknown>): ChatToolCall {
  return { id: callId(rng), type: "function", function: { name, arguments: JSON.stringify(args) } };
}

/** Python's json.dumps separators (", ", ": ") on a compact JSON text. */
function pythonJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(", ")}]`;
  if (typeof value === "object" && value !== null) {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pythonJson(v)}`)
      .join(", ")}}`;
  }
  return JSON.stringify(value);
}

/** The assistant message as a re-serialising client replays it. */
function reserialized(reply: ChatMessage, agentCallCount: number): ChatMessage {
  if (reply.tool_calls === undefined) return { role: "assistant", content: reply.content ?? "" };
  return {
    role: "assistant",
    content: reply.content ?? "",
    tool_calls: reply.tool_calls.map((call, i) => ({
      id: `toolu_${agentCallCount}_${i}`,
      type: "function",
      function: { name: call.function.name, arguments: pythonJson(JSON.parse(call.function.arguments)) },
    })),
  };
}

interface Msg {
  chat: ChatMessage;
  canonical: string;
}

function msg(chat: ChatMessage): Msg {
  return { chat, canonical: canonicalMessage(chat) };
}

interface LocalCall {
  agent: number;
  local: number;
  start: number;
  end: number;
  history: readonly Msg[];
  fails: boolean;
  reply: Msg | undefined;
  relation: TruthRelation;
  parent: number | undefined;
  divergesFrom: number | undefined;
}

interface AgentPlan {
  index: number;
  programId: string;
  kind: TraceAgentKind;
  model: string;
  start: number;
  sharedTask: number | undefined;
  task: string;
  firstReply: FirstReply;
  reserializes: boolean;
}

/** Builds one agent's calls on its own random stream. */
class AgentRun {
  readonly calls: LocalCall[] = [];

  constructor(
    readonly plan: AgentPlan,
    readonly rng: Rng,
    readonly options: AgentTraceOptions,
    readonly system: Msg,
  ) {}

  /** Model time of a successful call: a prefill share plus ~15 ms a generated token. */
  callDuration(): number {
    return 250 + 15 * lognormal(this.rng, 150, 0.8, 5, 2_000);
  }

  failure(): number {
    const r = this.rng.next();
    if (r < 0.6) return between(this.rng, 50, 500); // 5xx / 429
    if (r < 0.8) return 30_000; // timeout
    return between(this.rng, 1_000, 30_000); // client cancel
  }

  inOutage(at: number): boolean {
    const outage = this.options.outage;
    return outage !== undefined && at % outage.periodMs < outage.durationMs;
  }

  /** The call, and its re-sends while attempts fail; the successful attempt's local index and end. */
  send(history: readonly Msg[], start: number, relation: TruthRelation, parent: number | undefined, divergesFrom: number | undefined, reply: Msg): { local: number; end: number } {
    let at = start;
    let how = relation;
    let from = parent;
    let diverges = divergesFrom;
    for (let attempt = 0; ; attempt++) {
      const outage = this.inOutage(at);
      const fails = attempt < MAX_ATTEMPTS - 1 && (this.rng.next() < this.options.failureRate || outage);
      const end = at + (fails ? (outage ? between(this.rng, 20, 200) : this.failure()) : this.callDuration());
      const local = this.calls.length;
      this.calls.push({ agent: this.plan.index, local, start: at, end, history, fails, reply: fails ? undefined : reply, relation: how, parent: from, divergesFrom: diverges });
      if (!fails) return { local, end };
      at = end + 500 * 2 ** attempt * between(this.rng, 0.5, 1.5);
      how = "retry";
      from = local;
      diverges = undefined;
    }
  }

  /** What the client puts in its next call for the engine's reply. */
  replayed(reply: Msg): Msg {
    return this.plan.reserializes ? msg(reserialized(reply.chat, this.calls.length)) : reply;
  }

  /** A function of the task alone: the same for every agent with this task. */
  deterministicRng(salt: number): Rng {
    return new Rng(deriveSeed(hashString(this.plan.task), salt));
  }

  codingReply(step: number, final: boolean): Msg {
    const rng = this.rng;
    if (step === 0 && this.plan.firstReply === "t0-text") {
      return msg({ role: "assistant", content: `Plan: ${words(this.deterministicRng(1), 30)}.` });
    }
    if (step === 0 && this.plan.firstReply === "t0-tool") {
      // The same call for every agent with the task; the engine still gives each its own call ID.
      return msg({ role: "assistant", content: null, tool_calls: [toolCall(rng, "list_dir", { path: "." })] });
    }
    if (final) return msg({ role: "assistant", content: `Done. ${words(rng, 25)}.` });
    const n = rng.next() < 0.3 ? 2 + rng.int(2) : 1;
    const tool_calls = Array.from({ length: n }, () => {
      const name = pick(rng, TOOLS);
      return toolCall(rng, name, toolArguments(rng, name));
    });
    return msg({ role: "assistant", content: rng.next() < 0.5 ? null : `I'll check the ${words(rng, 3)} next.`, tool_calls });
  }

  toolResult(call: ChatToolCall, step: number): Msg {
    const text = step === 0 && this.plan.firstReply === "t0-tool" ? `README.md\npackage.json\nsrc/\ntest/\n${words(this.deterministicRng(2), 12)}` : `${call.function.name}: ${words(this.rng, 20 + this.rng.int(60))}`;
    return msg({ role: "tool", tool_call_id: call.id, content: text });
  }

  coding(): void {
    let history: Msg[] = [this.system, msg({ role: "user", content: this.plan.task })];
    const steps = 5 + this.rng.int(36);
    let at = this.plan.start;
    let relation: TruthRelation = "first";
    let parent: number | undefined;
    for (let step = 0; step < steps; step++) {
      const final = step === steps - 1;
      const reply = this.codingReply(step, final);
      const sent = this.send(history, at, relation, parent, undefined, reply);
      if (final) return;
      const replay = this.replayed(reply);
      history = [...history, replay];
      const calls = replay.chat.tool_calls ?? [];
      if (calls.length === 0) {
        history.push(msg({ role: "user", content: PROCEED }));
        at = sent.end + between(this.rng, 200, 3_000);
      } else {
        for (const call of calls) history.push(this.toolResult(call, step));
        // Parallel tool calls: the slowest decides.
        at = sent.end + Math.max(...calls.map(() => lognormal(this.rng, 800, 1.2, 20, 120_000)));
      }
      relation = "continuation";
      parent = sent.local;
    }
  }

  treeReply(depth: number): Msg {
    if (depth === 0 && this.plan.firstReply !== "sampled") return msg({ role: "assistant", content: `Thought: ${words(this.deterministicRng(3), 30)}.` });
    return msg({ role: "assistant", content: `${depth === 0 ? "Thought" : "Step"}: ${words(this.rng, 15 + this.rng.int(30))}. Score: ${this.rng.int(10)}/10.` });
  }

  treeSearch(): void {
    const maxDepth = 2 + this.rng.int(2);
    const root = [this.system, msg({ role: "user", content: this.plan.task })];
    const rootReply = this.treeReply(0);
    const sent = this.send(root, this.plan.start, "first", undefined, undefined, rootReply);
    this.expand({ history: root, reply: rootReply, local: sent.local, end: sent.end }, 0, maxDepth);
  }

  expand(node: { history: readonly Msg[]; reply: Msg; local: number; end: number }, depth: number, maxDepth: number): void {
    const rng = this.rng;
    const k = 2 + rng.int(4);
    // Alternative assistant replies only below the root: the root's messages hold no reply to share.
    const variant = depth === 0 || rng.next() < 0.5 ? "user" : "assistant";
    const keepOwn = variant === "user" || rng.next() < 0.5;
    const base = node.end + between(rng, 5, 200);
    const children: { history: readonly Msg[]; reply: Msg; local: number; end: number }[] = [];
    let firstChild: number | undefined;
    let at = base;
    for (let j = 0; j < k; j++) {
      let history: Msg[];
      if (variant === "user") {
        history = [...node.history, this.replayed(node.reply), msg({ role: "user", content: `Explore candidate ${j + 1}: ${words(rng, 8)}.` })];
      } else {
        const alternative = j === 0 && keepOwn ? this.replayed(node.reply) : msg({ role: "assistant", content: `Step: ${words(rng, 15 + rng.int(30))}. Score: ${rng.int(10)}/10.` });
        history = [...node.history, alternative, msg({ role: "user", content: EVALUATE })];
      }
      const continues = j === 0 && keepOwn;
      const divergesFrom = continues ? undefined : variant === "user" ? firstChild : node.local;
      const reply = this.treeReply(depth + 1);
      // Child 0's first attempt: the call later user-continuation siblings leave.
      if (j === 0) firstChild = this.calls.length;
      const sent = this.send(history, at, continues ? "continuation" : "fork", node.local, divergesFrom, reply);
      children.push({ history, reply, local: sent.local, end: sent.end });
      at += between(rng, 1, 30);
    }
    if (depth + 1 >= maxDepth) return;
    const expanded = rng.next() < 0.4 ? 2 : 1;
    for (let e = 0; e < expanded; e++) {
      const child = children.splice(rng.int(children.length), 1)[0];
      if (child !== undefined) this.expand(child, depth + 1, maxDepth);
    }
  }
}

function sharedTaskText(seed: number, task: number): string {
  const rng = new Rng(deriveSeed(seed, 0x7a5c, task));
  return `Fix the failing test in ${pick(rng, WORDS)}/${pick(rng, WORDS)}.test.ts: ${words(rng, 12)}. Run the test suite before you finish.`;
}

/** The trace of `options.agents` agents (defaults: DEFAULT_AGENT_TRACE_OPTIONS). */
export function generateAgentTraces(overrides: Partial<AgentTraceOptions> = {}): AgentTrace {
  const options: AgentTraceOptions = { ...DEFAULT_AGENT_TRACE_OPTIONS, ...overrides };
  if (!(Number.isInteger(options.agents) && options.agents >= 1)) throw new RangeError(`agents must be an integer >= 1, got ${options.agents}`);
  if (options.models.length === 0) throw new RangeError("models must not be empty");
  const system = msg({ role: "system", content: SHARED_SYSTEM_PROMPT });
  const tasks = Array.from({ length: options.sharedTasks }, (_, t) => sharedTaskText(options.seed, t));
  const width = String(options.agents - 1).length;

  const locals: LocalCall[] = [];
  const plans: AgentPlan[] = [];
  for (let a = 0; a < options.agents; a++) {
    const rng = new Rng(deriveSeed(options.seed, a));
    const kind: TraceAgentKind = rng.next() < options.treeSearchShare ? "tree-search" : "coding";
    const model = pick(rng, options.models);
    const start = rng.next() * options.arrivalWindowMs;
    const sharedTask = tasks.length > 0 && rng.next() < options.identicalFirstShare ? rng.int(tasks.length) : undefined;
    const task = sharedTask === undefined ? `Issue #${1_000 + rng.int(9_000)} in ${pick(rng, WORDS)}-${pick(rng, WORDS)}: ${words(rng, 14)}.` : (tasks[sharedTask] as string);
    const zero = sharedTask !== undefined && rng.next() < options.temperatureZeroShare;
    const firstReply: FirstReply = !zero ? "sampled" : kind === "coding" && rng.next() < 0.5 ? "t0-tool" : "t0-text";
    const reserializes = rng.next() < options.reserializingClientShare;
    const plan: AgentPlan = { index: a, programId: `truth_${String(a).padStart(width, "0")}`, kind, model, start, sharedTask, task, firstReply, reserializes };
    plans.push(plan);
    const run = new AgentRun(plan, rng, options, system);
    if (kind === "coding") run.coding();
    else run.treeSearch();
    locals.push(...run.calls);
  }

  // Merge: calls in start order; local references become trace indices.
  locals.sort((x, y) => x.start - y.start || x.agent - y.agent || x.local - y.local);
  const globalOf = new Map<string, number>();
  locals.forEach((c, i) => globalOf.set(`${c.agent}:${c.local}`, i));
  const ref = (agent: number, local: number | undefined) => (local === undefined ? undefined : globalOf.get(`${agent}:${local}`));
  const agentCalls: number[][] = plans.map(() => []);
  const calls: TraceCall[] = locals.map((c, index) => {
    const plan = plans[c.agent] as AgentPlan;
    agentCalls[c.agent]?.push(index);
    return {
      index,
      agent: c.agent,
      kind: plan.kind,
      programId: plan.programId,
      model: plan.model,
      start: c.start,
      end: c.end,
      chat: c.history.map((m) => m.chat),
      messages: c.history.map((m) => m.canonical),
      fails: c.fails,
      reply: c.reply?.canonical,
      replyChat: c.reply?.chat,
      relation: c.relation,
      parent: ref(c.agent, c.parent),
      divergesFrom: ref(c.agent, c.divergesFrom),
    };
  });
  const agents: TraceAgent[] = plans.map((p) => ({
    index: p.index,
    programId: p.programId,
    kind: p.kind,
    model: p.model,
    start: p.start,
    sharedTask: p.sharedTask,
    firstReply: p.firstReply,
    reserializes: p.reserializes,
    calls: agentCalls[p.index] ?? [],
  }));
  const events: TraceEvent[] = calls.flatMap((c): TraceEvent[] => [
    { time: c.start, type: "start", call: c.index },
    { time: c.end, type: "end", call: c.index },
  ]);
  events.sort((x, y) => x.time - y.time || (x.type === y.type ? x.call - y.call : x.type === "end" ? -1 : 1));
  return { options, agents, calls, events };
}
