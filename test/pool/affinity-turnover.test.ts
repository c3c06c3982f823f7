import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { chatBody, metricValue, operatorGet, signedCall, testConfig } from "./helpers.js";

/*
 * The routing's turnover rule through the pool (core/kv/affinity-turnover.ts), with the
 * project's simulated engines: the engine's own usage (prompt and cached tokens) is what
 * the pool counts, and a long call whose program's engine turned over its KV since goes
 * to the least-loaded engine, counted under its own dispatch reason.
 */

let engines: SimEngineHandle[];
let pool: PoolHandle;
/** The pool's idea of each engine's KV (tokens): half of it computed since a program's call left is the rule's bound. */
const CAPACITY = 4_000;

beforeAll(async () => {
  engines = await Promise.all(["e1", "e2"].map((engineId) => startSimEngine({ engineId, timeScale: 1_000 })));
  pool = await startPool(
    testConfig({
      engines: engines.map((engine, i) => ({ id: `e${i + 1}`, url: engine.url, kvCapacityTokens: CAPACITY })),
      scheduling: { routing: { longPromptTokens: 50, affinityTurnover: 0.5 } },
    }),
  );
});
afterAll(async () => {
  await pool?.close();
  await Promise.all((engines ?? []).map((engine) => engine.close()));
});

/** One call of `program`, the edge's hint naming `engine` ("" none); returns the engine's usage. */
async function runCall(program: string, engine: string, content: string): Promise<{ prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } }> {
  const signed = await signedCall({ fields: { program, engine }, body: chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: 2, messages: [{ role: "user", content }] }) });
  const res = await fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: signed.headers, body: signed.body });
  expect(res.status).toBe(200);
  return ((await res.json()) as { usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } }).usage;
}

const dispatches = async (engine: string, reason: string) =>
  metricValue(await (await operatorGet(pool.url, "/metrics")).text(), `agentix_pool_dispatches_total{engine="${engine}",reason="${reason}"}`) ?? 0;

describe("affinity turnover through the pool", () => {
  it("routes a long call as one without a hint once its program's engine computed more than half its KV since, and keeps a fresher hint", async () => {
    const task = "Refactor the tokenizer module and keep its tests green. ".repeat(12);
    // Every call here names e2 (an idle pool's least-loaded engine is e1, the lowest id): the program's first call has no mark, and its hint is kept.
    await runCall("prog_turnover_a", "e2", task);
    // Another program reads its own prompt twice on e2: the second finds it cached, so e2 is known to report cached tokens.
    const warm = "Summarise the changelog for the release notes. ".repeat(12);
    await runCall("prog_turnover_w", "e2", warm);
    const again = await runCall("prog_turnover_w", "e2", warm);
    expect(again.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThan(0);
    // Other programs compute fresh prompts on e2: past half its KV since prog_turnover_a's call left.
    let computed = 0;
    for (let i = 0; computed <= CAPACITY / 2; i++) {
      const usage = await runCall(`prog_turnover_churn${i}`, "e2", `Churn ${i}: ${"a fresh prompt of its own, nothing cached ".repeat(20)}${i}`);
      computed += usage.prompt_tokens - (usage.prompt_tokens_details?.cached_tokens ?? 0);
    }
    expect(await dispatches("e2", "long-affinity-turned-over")).toBe(0);

    // The program comes back: routed as a call without a hint, to the least-loaded engine.
    await runCall("prog_turnover_a", "e2", `${task}And now the docs.`);
    expect(await dispatches("e1", "long-affinity-turned-over")).toBe(1);
    // A program whose call left e2 after the churn keeps its hint.
    await runCall("prog_turnover_c", "e2", "Add a retry to the uploader. ".repeat(12));
    const kept = await dispatches("e2", "long-affinity");
    await runCall("prog_turnover_c", "e2", `${"Add a retry to the uploader. ".repeat(12)}With backoff.`);
    expect(await dispatches("e2", "long-affinity")).toBe(kept + 1);
    expect(await dispatches("e1", "long-affinity-turned-over")).toBe(1);
  });
});
