import { describe, expect, it } from "vitest";
import { canonicalMessage } from "../../src/core/recognition/conversation-index.js";
import { type AgentTrace, type ChatMessage, generateAgentTraces, SHARED_SYSTEM_PROMPT, type TraceCall } from "../../src/sim/workload/agent-traces.js";

/*
 * The agent-trace generator behind `npm run bench:recognition`: deterministic per seed,
 * and the cases it claims are really in its traces (continuations, forks sharing a
 * prefix that ends in an assistant message, retries repeating a failed call exactly,
 * identical first messages across agents, temperature-0 duplicates).
 */

const ADVERSARIAL = { agents: 80, seed: 3, treeSearchShare: 0.5, failureRate: 0.1, identicalFirstShare: 0.5, sharedTasks: 2 };

/** A call's conversation: its messages, then its reply (if answered). */
function conversation(call: TraceCall): ChatMessage[] {
  return call.replyChat === undefined ? [...call.chat] : [...call.chat, call.replyChat];
}

function commonPrefix(a: readonly ChatMessage[], b: readonly ChatMessage[]): number {
  let n = 0;
  while (n < a.length && n < b.length && canonicalMessage(a[n] as ChatMessage) === canonicalMessage(b[n] as ChatMessage)) n++;
  return n;
}

function callAt(trace: AgentTrace, index: number | undefined): TraceCall {
  const call = index === undefined ? undefined : trace.calls[index];
  if (call === undefined) throw new Error(`no call ${index}`);
  return call;
}

describe("generateAgentTraces", () => {
  it("is deterministic per seed", () => {
    const a = generateAgentTraces({ ...ADVERSARIAL, agents: 30 });
    const b = generateAgentTraces({ ...ADVERSARIAL, agents: 30 });
    expect(b).toEqual(a);
    const c = generateAgentTraces({ ...ADVERSARIAL, agents: 30, seed: 4 });
    expect(c.calls.map((x) => x.messages)).not.toEqual(a.calls.map((x) => x.messages));
  });

  it("gives every call its canonical messages, ground truth, time order and one start and end event", () => {
    const trace = generateAgentTraces(ADVERSARIAL);
    trace.calls.forEach((call, i) => {
      expect(call.index).toBe(i);
      expect(call.programId).toBe(trace.agents[call.agent]?.programId);
      expect(call.messages).toEqual(call.chat.map(canonicalMessage));
      expect(call.chat[0]).toEqual({ role: "system", content: SHARED_SYSTEM_PROMPT });
      expect(call.end).toBeGreaterThan(call.start);
      expect(call.fails).toBe(call.reply === undefined);
      if (call.replyChat !== undefined) expect(call.reply).toBe(canonicalMessage(call.replyChat));
      if (i > 0) expect(call.start).toBeGreaterThanOrEqual(callAt(trace, i - 1).start);
    });
    expect(new Set(trace.calls.map((c) => c.programId)).size).toBe(ADVERSARIAL.agents);
    expect(trace.events).toHaveLength(2 * trace.calls.length);
    for (let i = 1; i < trace.events.length; i++) expect(trace.events[i]?.time).toBeGreaterThanOrEqual(trace.events[i - 1]?.time ?? 0);
    // Agents interleave: calls of several agents in flight at once.
    const inFlight = new Set<number>();
    let mostAgents = 0;
    for (const e of trace.events) {
      if (e.type === "start") inFlight.add(callAt(trace, e.call).agent);
      else inFlight.delete(callAt(trace, e.call).agent);
      mostAgents = Math.max(mostAgents, inFlight.size);
    }
    expect(mostAgents).toBeGreaterThan(5);
  });

  it("runs coding agents as a loop of 5–40 steps, each call extending the previous call and its reply", () => {
    const trace = generateAgentTraces(ADVERSARIAL);
    const coding = trace.agents.filter((a) => a.kind === "coding");
    expect(coding.length).toBeGreaterThan(10);
    for (const agent of coding) {
      const answered = agent.calls.map((i) => callAt(trace, i)).filter((c) => !c.fails);
      expect(answered.length).toBeGreaterThanOrEqual(5);
      expect(answered.length).toBeLessThanOrEqual(40);
      expect(answered.filter((c) => c.relation === "fork")).toHaveLength(0);
    }
    const continuations = trace.calls.filter((c) => c.relation === "continuation");
    expect(continuations.length).toBeGreaterThan(100);
    for (const call of continuations) {
      const parent = callAt(trace, call.parent);
      expect(parent.programId).toBe(call.programId);
      expect(parent.end).toBeLessThan(call.start);
      expect(call.messages.slice(0, parent.messages.length + 1)).toEqual([...parent.messages, parent.reply]);
      expect(call.messages.length).toBeGreaterThan(parent.messages.length + 1);
    }
    // Tool calls with their results, parallel ones included.
    expect(trace.calls.some((c) => (c.replyChat?.tool_calls?.length ?? 0) > 1)).toBe(true);
    expect(trace.calls.some((c) => c.chat.at(-1)?.role === "tool")).toBe(true);
  });

  it("forks: same program, a prefix shared with an earlier call's conversation that ends in an assistant message, then different", () => {
    const trace = generateAgentTraces(ADVERSARIAL);
    const forks = trace.calls.filter((c) => c.relation === "fork");
    expect(forks.length).toBeGreaterThan(50);
    let atReply = 0;
    let alternativeReply = 0;
    for (const fork of forks) {
      expect(fork.kind).toBe("tree-search");
      const from = callAt(trace, fork.divergesFrom);
      expect(from.programId).toBe(fork.programId);
      expect(from.start).toBeLessThanOrEqual(fork.start);
      const theirs = conversation(from);
      const shared = commonPrefix(fork.chat, theirs);
      expect(shared).toBeLessThan(fork.chat.length);
      expect(shared).toBeLessThan(theirs.length);
      const lastAssistant = fork.chat.slice(0, shared).findLastIndex((m) => m.role === "assistant");
      expect(lastAssistant).toBeGreaterThanOrEqual(0);
      if (lastAssistant === shared - 1) atReply += 1; // a different user continuation of a node's reply
      if (fork.chat[shared]?.role === "assistant") alternativeReply += 1; // a different assistant reply
      // Run in parallel with its siblings: started before the call it leaves has ended, or right after its parent.
      const parent = callAt(trace, fork.parent);
      expect(fork.start).toBeGreaterThan(parent.end);
    }
    expect(atReply).toBeGreaterThan(10);
    expect(alternativeReply).toBeGreaterThan(10);
    // Siblings overlap in time.
    expect(forks.some((f) => f.start < callAt(trace, f.divergesFrom).end)).toBe(true);
  });

  it("retries repeat a failed call's messages exactly, after it failed", () => {
    const trace = generateAgentTraces(ADVERSARIAL);
    const retries = trace.calls.filter((c) => c.relation === "retry");
    expect(retries.length).toBeGreaterThan(20);
    for (const retry of retries) {
      const failed = callAt(trace, retry.parent);
      expect(failed.fails).toBe(true);
      expect(failed.reply).toBeUndefined();
      expect(failed.programId).toBe(retry.programId);
      expect(retry.messages).toEqual(failed.messages);
      expect(retry.chat).toEqual(failed.chat);
      expect(retry.start).toBeGreaterThan(failed.end);
    }
    // Every failed call is re-sent once.
    for (const failed of trace.calls.filter((c) => c.fails)) expect(retries.filter((r) => r.parent === failed.index)).toHaveLength(1);
    expect(generateAgentTraces({ ...ADVERSARIAL, failureRate: 0 }).calls.some((c) => c.fails || c.relation === "retry")).toBe(false);
  });

  it("an outage fails every attempt that starts in its window, up to the last re-send", () => {
    const outage = { periodMs: 60_000, durationMs: 5_000 };
    const trace = generateAgentTraces({ ...ADVERSARIAL, failureRate: 0, outage });
    const inside = trace.calls.filter((c) => c.start % outage.periodMs < outage.durationMs);
    expect(inside.length).toBeGreaterThan(20);
    const attempt = (c: TraceCall): number => (c.relation === "retry" ? 1 + attempt(callAt(trace, c.parent)) : 0);
    for (const call of inside) expect(call.fails).toBe(attempt(call) < 3);
    expect(trace.calls.filter((c) => c.fails).every((c) => c.start % outage.periodMs < outage.durationMs)).toBe(true);
  });

  it("has agents whose first calls are identical (shared task and system prompt)", () => {
    const trace = generateAgentTraces(ADVERSARIAL);
    const firstCalls = new Map<string, Set<number>>();
    for (const call of trace.calls.filter((c) => c.relation === "first")) {
      const key = call.messages.join("\n");
      firstCalls.set(key, (firstCalls.get(key) ?? new Set()).add(call.agent));
    }
    const shared = [...firstCalls.values()].filter((agents) => agents.size > 1);
    expect(shared.length).toBe(ADVERSARIAL.sharedTasks);
    expect(shared.reduce((n, s) => n + s.size, 0)).toBe(trace.agents.filter((a) => a.sharedTask !== undefined).length);
    // Without the share, every first call is its own.
    const distinct = generateAgentTraces({ ...ADVERSARIAL, identicalFirstShare: 0 });
    expect(new Set(distinct.calls.filter((c) => c.relation === "first").map((c) => c.messages.join("\n"))).size).toBe(ADVERSARIAL.agents);
  });

  it("temperature-0 agents with one task send identical second calls (the ambiguous case)", () => {
    const trace = generateAgentTraces({ ...ADVERSARIAL, failureRate: 0, identicalFirstShare: 1, temperatureZeroShare: 1 });
    expect(new Set(trace.agents.map((a) => a.firstReply))).toEqual(new Set(["t0-text", "t0-tool"]));
    const seconds = new Map<string, Set<number>>();
    for (const agent of trace.agents) {
      const second = callAt(trace, agent.calls[1]);
      const key = second.messages.join("\n");
      seconds.set(key, (seconds.get(key) ?? new Set()).add(agent.index));
    }
    expect([...seconds.values()].some((agents) => agents.size > 1)).toBe(true);
  });

  it("re-serialising clients replay a reply in another shape that canonicalises to the same message", () => {
    const trace = generateAgentTraces({ ...ADVERSARIAL, failureRate: 0, treeSearchShare: 0, reserializingClientShare: 1 });
    let reshaped = 0;
    for (const call of trace.calls.filter((c) => c.relation === "continuation")) {
      const parent = callAt(trace, call.parent);
      const replayed = call.chat[parent.chat.length] as ChatMessage;
      if (JSON.stringify(replayed) !== JSON.stringify(parent.replyChat)) reshaped += 1;
      expect(canonicalMessage(replayed)).toBe(parent.reply);
    }
    expect(reshaped).toBeGreaterThan(100);
  });
});
