import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RetentionHintMode } from "../../src/pool/config.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { renderPrompt, tokenize } from "../../src/protocol/tokens.js";
import { LLAMA_31_8B_H100 } from "../../src/sim/profiles.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { chatBody, metricValue, operatorGet, signedCall, signedKvHints, testConfig, waitFor } from "./helpers.js";

/*
 * Retention signals end to end against the project's simulated engine (issue 13): the
 * pool tags the call, the engine ranks the context's blocks by the hints, and its
 * answers say it held the contexts they named (applied).
 */

let engine: SimEngineHandle;
let pool: PoolHandle;

beforeAll(async () => {
  engine = await startSimEngine({ engineId: "sim-r", timeScale: 1_000 });
  pool = await startPool(testConfig({ engines: [{ id: "sim-r", url: engine.url, retentionHints: "agentix" }] }));
});
afterAll(async () => {
  await pool?.close();
  await engine?.close();
});

const PROGRAM = "prog_retentionsim1";

async function runCall(generation: number, content: string): Promise<void> {
  const signed = await signedCall({
    fields: { program: PROGRAM, generation },
    body: chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: 4, messages: [{ role: "user", content }] }),
  });
  const res = await fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: signed.headers, body: signed.body });
  expect(res.status).toBe(200);
  await res.text();
}

/** The simulated engine's own count of hints it applied, by action (its /metrics). */
async function engineApplied(action: "keeps" | "normals" | "drops"): Promise<number> {
  const text = await (await fetch(`${engine.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`agentix:kv_retention_${action}_applied_total`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

const poolApplied = async () => metricValue(await (await operatorGet(pool.url, "/metrics")).text(), 'agentix_pool_kv_retention_hints_applied_total{engine="sim-r"}') ?? 0;

describe("KV retention signals with the simulated engine", () => {
  it("the engine applies the keep after a call, the drop of a replaced generation, and the drop at the program's end", async () => {
    const context = "Fix the failing test in the parser module. ".repeat(20);
    await runCall(0, context);
    await waitFor(async () => (await engineApplied("keeps")) === 1, "the engine applied the keep");
    // A compacted history: a new generation; the old context is dropped where it is held.
    await runCall(1, "Summary: the parser test passes; the lint is next. ".repeat(10));
    await waitFor(async () => (await engineApplied("drops")) === 1, "the engine applied the drop of generation 0");
    const hints = await signedKvHints({ fields: { program: PROGRAM } });
    expect((await fetch(`${pool.url}/v1/kv-hints`, { method: "POST", headers: hints.headers, body: hints.body })).status).toBe(202);
    await waitFor(async () => (await engineApplied("drops")) === 2, "the engine applied the drop at the end");
    // The pool counted what the engine's answers said it applied: two keeps (one per call), two drops.
    await waitFor(async () => (await poolApplied()) === 4, "the pool counted four applied hints");
  });
});

/*
 * A split call on simulated vLLM engines: the prefill engine is told to keep the context
 * it computed through the hand-off (the transfer and decode the pool expects) and again
 * through the tool wait after the call; the decode engine only through the tool wait.
 */
describe("KV retention signals on a split call with simulated engines", () => {
  it("the prefill engine applies the hand-off keep besides the tool wait's; the decode engine's copy is not kept", async () => {
    const [prefill, decode] = await Promise.all([startSimEngine({ engineId: "sim-rp", timeScale: 1_000 }), startSimEngine({ engineId: "sim-rd", timeScale: 1_000 })]);
    const front = await startPool(
      testConfig({
        engines: [
          { id: "p", url: prefill.url, role: "prefill", retentionHints: "agentix" },
          { id: "d", url: decode.url, role: "decode", retentionHints: "agentix" },
        ],
      }),
    );
    try {
      const signed = await signedCall({
        fields: { program: "prog_splitkeep01" },
        body: chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: 8, messages: [{ role: "user", content: "Fix the failing test in the parser module. ".repeat(20) }] }),
      });
      const res = await fetch(`${front.url}/v1/chat/completions`, { method: "POST", headers: signed.headers, body: signed.body });
      expect(res.status).toBe(200);
      await res.text();
      await waitFor(() => prefill.model.stats().keepsApplied === 2, "the keeps applied");
      // The tool wait's keeps went out together: the decode engine's copy got none (keepHandedOverCopies off).
      const metrics = await (await operatorGet(front.url, "/metrics")).text();
      expect(metricValue(metrics, 'agentix_pool_kv_retention_hints_total{engine="p",action="keep",outcome="sent"}')).toBe(2);
      expect(metricValue(metrics, 'agentix_pool_kv_retention_hints_total{engine="d",action="keep",outcome="sent"}') ?? 0).toBe(0);
      expect(decode.model.stats().keepsApplied).toBe(0);
    } finally {
      await front.close();
      await Promise.all([prefill.close(), decode.close()]);
    }
  });
});

/*
 * What the signals buy: a program in a tool wait keeps its context through a flood that
 * evicts the context of a program that ended, where plain LRU evicts the waiting one
 * (it is older). 40 blocks of 16 tokens (the simulated engine in real time, so the
 * keep's duration means the same to pool and engine): two 154-token contexts cache 9
 * blocks each, 22 stay free, and the flood needs 29.
 */
describe("KV retention under pressure: a waiting program's context survives, an ended one's goes first", () => {
  const PROFILE = { ...LLAMA_31_8B_H100, name: "test-small", kvBlocks: 40, maxModelLen: 640 };
  type Messages = { role: "user"; content: string }[];
  const waiting: Messages = [{ role: "user", content: "a".repeat(600) }];
  const ended: Messages = [{ role: "user", content: "u".repeat(600) }];
  const flood: Messages = [{ role: "user", content: "z".repeat(1_800) }];
  const blocksOf = (messages: Messages) => Math.floor(tokenize(renderPrompt({ messages })).length / 16);

  async function run(mode: RetentionHintMode): Promise<number> {
    const sim = await startSimEngine({ engineId: "sim-p", timeScale: 1, profile: PROFILE });
    const front = await startPool(testConfig({ engines: [{ id: "sim-p", url: sim.url, retentionHints: mode, maxInFlight: 1 }] }));
    try {
      const call = async (program: string, messages: Messages) => {
        const signed = await signedCall({ fields: { program }, body: chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: 1, messages }) });
        const res = await fetch(`${front.url}/v1/chat/completions`, { method: "POST", headers: signed.headers, body: signed.body });
        expect(res.status).toBe(200);
        await res.text();
      };
      await call("prog_waiting0001", waiting);
      await call("prog_ended000001", ended);
      const end = await signedKvHints({ fields: { program: "prog_ended000001" } });
      expect((await fetch(`${front.url}/v1/kv-hints`, { method: "POST", headers: end.headers, body: end.body })).status).toBe(202);
      if (mode === "agentix") {
        // Both keeps (one per call) and the end's drop have reached the engine.
        await waitFor(() => sim.model.stats().keepsApplied === 2 && sim.model.stats().dropsApplied === 1, "the hints applied");
      }
      await call("prog_flood000001", flood);
      return sim.model.cachedPrefixTokens(tokenize(renderPrompt({ messages: waiting })));
    } finally {
      await front.close();
      await sim.close();
    }
  }

  it("with hints the waiting context is whole after the flood; with plain LRU it is not", async () => {
    expect(blocksOf(waiting)).toBe(9);
    expect(Math.ceil((tokenize(renderPrompt({ messages: flood })).length + 1) / 16)).toBe(29);
    const withHints = await run("agentix");
    const withoutHints = await run("none");
    expect(withHints).toBe(9 * 16);
    expect(withoutHints).toBeLessThan(9 * 16);
  });
});

/*
 * A branch the agent ended (thread_ended, from DELETE /v1/programs/{id}/threads/{thread})
 * goes first, though it is the program's most recent context: plain recency would evict
 * its older sibling. Same engine and blocks as above; the engine runs 1,000× time-scaled
 * so the keeps each call earns (TAO's 5 s default wait + 2 s) have ended before the flood,
 * and only recency and the drop rank the two contexts.
 */
describe("KV retention under pressure: an ended thread's context goes before its sibling's", () => {
  const PROFILE = { ...LLAMA_31_8B_H100, name: "test-small", kvBlocks: 40, maxModelLen: 640 };
  type Messages = { role: "user"; content: string }[];
  const main: Messages = [{ role: "user", content: "m".repeat(600) }];
  const branch: Messages = [{ role: "user", content: "b".repeat(600) }];
  const flood: Messages = [{ role: "user", content: "z".repeat(1_800) }];
  const PROGRAM_WITH_BRANCH = "prog_branchsim001";
  const cachedBlocks = (sim: SimEngineHandle, messages: Messages) => sim.model.cachedPrefixTokens(tokenize(renderPrompt({ messages }))) / 16;

  async function run(endBranch: boolean): Promise<{ main: number; branch: number }> {
    const sim = await startSimEngine({ engineId: "sim-t", timeScale: 1_000, profile: PROFILE });
    const front = await startPool(testConfig({ engines: [{ id: "sim-t", url: sim.url, retentionHints: "agentix", maxInFlight: 1 }] }));
    try {
      const call = async (program: string, thread: string, messages: Messages) => {
        const signed = await signedCall({ fields: { program, thread }, body: chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: 1, messages }) });
        const res = await fetch(`${front.url}/v1/chat/completions`, { method: "POST", headers: signed.headers, body: signed.body });
        expect(res.status).toBe(200);
        await res.text();
      };
      await call(PROGRAM_WITH_BRANCH, "main", main);
      await call(PROGRAM_WITH_BRANCH, "branch", branch);
      expect(cachedBlocks(sim, main)).toBe(9);
      expect(cachedBlocks(sim, branch)).toBe(9);
      if (endBranch) {
        const end = await signedKvHints({
          fields: { program: PROGRAM_WITH_BRANCH },
          hints: [{ type: "thread_ended", thread: "branch", generation: 0, outcome: "abandoned" }],
        });
        expect((await fetch(`${front.url}/v1/kv-hints`, { method: "POST", headers: end.headers, body: end.body })).status).toBe(202);
        await waitFor(() => sim.model.stats().dropsApplied === 1, "the engine applied the branch's drop");
        const metrics = await (await operatorGet(front.url, "/metrics")).text();
        expect(metricValue(metrics, 'agentix_pool_kv_hints_total{type="thread_ended"}')).toBe(1);
      }
      // 30 ms real is 30 s of engine time: every keep has ended.
      await new Promise((resolve) => setTimeout(resolve, 30));
      await call("prog_flood000002", "main", flood);
      return { main: cachedBlocks(sim, main), branch: cachedBlocks(sim, branch) };
    } finally {
      await front.close();
      await sim.close();
    }
  }

  it("with the branch ended, the flood evicts the branch and the older main thread stays whole; without, main goes", async () => {
    const ended = await run(true);
    expect(ended.main).toBe(9);
    expect(ended.branch).toBeLessThan(9);
    const notEnded = await run(false);
    expect(notEnded.main).toBeLessThan(9);
    expect(notEnded.branch).toBe(9);
  });
});
