import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { startFakeEngine } from "./fake-engine.js";
import { chatBody, metricValue, operatorGet, operatorHeaders, signedCall, testConfig, waitFor } from "./helpers.js";

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

/*
 * The retention shield through the pool: a context the pool keeps through a tool wait on
 * an engine that takes retention hints is not judged by that engine's turnover.
 */
describe("affinity turnover and retention keeps", () => {
  async function comeBack(retention: boolean): Promise<string[]> {
    const fakes = await Promise.all(
      ["e1", "e2"].map((id) =>
        startFakeEngine({
          // The program's answer names a tool (TAO predicts its return: the pool keeps its context); the churn's prompts are computed whole.
          answer: (call) =>
            String(call.body.messages && JSON.stringify(call.body.messages)).includes("churn")
              ? { usage: { prompt: 3_000, completion: 1, cached: 1 } }
              : { usage: { prompt: 600, completion: 5, cached: 500 }, toolCalls: [{ id: "call_1", name: "bash", arguments: '{"cmd":"make test"}' }] },
          ...(retention ? { retention: "takes" as const } : {}),
        }),
      ),
    );
    const front = await startPool(
      testConfig({
        engines: fakes.map((fake, i) => ({ id: `e${i + 1}`, url: fake.url, kvCapacityTokens: 4_000, ...(retention ? { retentionHints: "agentix" as const } : {}) })),
        scheduling: { routing: { longPromptTokens: 1, affinityTurnover: 0.5 } },
      }),
    );
    try {
      const call = async (program: string, content: string) => {
        const signed = await signedCall({ fields: { program, engine: "e2" }, body: chatBody({ messages: [{ role: "user", content }] }) });
        const res = await front.app.request("/v1/chat/completions", { method: "POST", headers: signed.headers, body: signed.body });
        expect(res.status).toBe(200);
        await res.text();
      };
      await call("prog_shielded", "Run the tests and fix what fails.");
      if (retention) await waitFor(() => (fakes[1]?.retentionBatches.length ?? 0) > 0, "the keep through the tool wait");
      await call("prog_churn_1", "churn one");
      await call("prog_churn_2", "churn two");
      await call("prog_shielded", "Run the tests and fix what fails. The tests ran.");
      const text = await (await front.app.request("/metrics", { headers: operatorHeaders() })).text();
      return text.split("\n").filter((line) => line.startsWith("agentix_pool_dispatches_total") && !line.endsWith(" 0"));
    } finally {
      await front.close();
      await Promise.all(fakes.map((fake) => fake.close()));
    }
  }

  it("keeps the hint of a context kept on its engine, and drops it where no keep was sent", async () => {
    const kept = await comeBack(true);
    expect(kept).toContain('agentix_pool_dispatches_total{engine="e2",reason="long-affinity"} 4');
    expect(kept.some((line) => line.includes("long-affinity-turned-over"))).toBe(false);
    const unkept = await comeBack(false);
    expect(unkept).toContain('agentix_pool_dispatches_total{engine="e1",reason="long-affinity-turned-over"} 1');
  });
});
