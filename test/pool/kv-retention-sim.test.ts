import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
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
