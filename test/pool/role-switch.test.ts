import { afterEach, describe, expect, it } from "vitest";
import { isDoneEvent, SseEventSplitter } from "../../src/protocol/sse.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import type { PoolConfigInput } from "../../src/pool/config.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { chatBody, metricValue, operatorGet, signedCall, testConfig, waitFor } from "./helpers.js";

/*
 * Live role switches in the pool (issue 13): a draining engine finishes its calls, then
 * flips; an overlapping one (vLLM kind: it serves both sides) takes its new role's work at
 * once while its old role's calls stream on. No call is lost either way.
 */

const open: { engines: SimEngineHandle[]; pools: PoolHandle[] } = { engines: [], pools: [] };
afterEach(async () => {
  await Promise.all(open.pools.map((p) => p.close()));
  await Promise.all(open.engines.map((e) => e.close()));
  open.engines = [];
  open.pools = [];
});

async function engines(ids: string[], timeScale: number): Promise<SimEngineHandle[]> {
  const started = await Promise.all(ids.map((engineId) => startSimEngine({ engineId, timeScale })));
  open.engines.push(...started);
  return started;
}

async function pool(input: Partial<PoolConfigInput> & Pick<PoolConfigInput, "engines">): Promise<PoolHandle> {
  const started = await startPool(testConfig(input));
  open.pools.push(started);
  return started;
}

const PROMPT = Array.from({ length: 1_500 }, (_, i) => `w${i % 61}`).join(" ");

/** One streamed call to its end: the tokens of text it carried and whether it ended with [DONE]. `content` defaults to the prompt after a random word (nothing cached). */
async function streamedCall(p: PoolHandle, maxTokens: number, content = `${Math.random()} ${PROMPT}`): Promise<{ status: number; words: number; done: boolean }> {
  const call = await signedCall({ body: chatBody({ model: DEFAULT_SIM_MODEL, messages: [{ role: "user", content }], max_tokens: maxTokens, ignore_eos: true, stream: true }) });
  const response = await fetch(`${p.url}/v1/chat/completions`, { method: "POST", headers: call.headers, body: call.body });
  if (response.status !== 200) return { status: response.status, words: 0, done: false };
  let text = "";
  let done = false;
  const reader = response.body!.pipeThrough(new SseEventSplitter()).getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    if (isDoneEvent(next.value)) done = true;
    const match = /"content":"([^"]*)"/.exec(next.value);
    if (match) text += match[1];
  }
  return { status: 200, words: text.trim().split(/\s+/).filter(Boolean).length, done };
}

const simMetric = async (engine: SimEngineHandle, series: string) => {
  const text = await (await fetch(`${engine.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
};

describe("live role switches", () => {
  it("drains a prefill engine under load, flips it to decode, and loses no call", async () => {
    const [p1, p2, d1] = await engines(["sim-p1", "sim-p2", "sim-d1"], 5);
    const p = await pool({
      engines: [
        { id: "p1", url: p1!.url, role: "prefill", profile: "llama-3.1-8b-h100", roleSwitch: "drain" },
        { id: "p2", url: p2!.url, role: "prefill", profile: "llama-3.1-8b-h100" },
        { id: "d1", url: d1!.url, role: "decode", profile: "llama-3.1-8b-h100" },
      ],
    });
    const calls = Array.from({ length: 24 }, () => streamedCall(p, 40));
    await waitFor(() => (p.dispatcher.engineRoles().find((e) => e.id === "p1")?.inFlight ?? 0) > 0, "prefills running on p1");
    const heldBefore = await simMetric(p1!, 'agentix_sim_kv_handoffs_total{side="prefill",outcome="held"}');
    const draining = p.dispatcher.engineRoles().find((e) => e.id === "p1")!.inFlight;
    expect(p.dispatcher.startRoleSwitch({ engineId: "p1", from: "prefill", to: "decode", reason: "test" })).toBe(true);
    // The last prefill engine left cannot switch too.
    expect(p.dispatcher.startRoleSwitch({ engineId: "p2", from: "prefill", to: "decode", reason: "test" })).toBe(false);

    const results = await Promise.all(calls);
    expect(results.every((r) => r.status === 200 && r.done && r.words === 40)).toBe(true);
    // Nothing new was prefilled on p1 once it drained: at most the prefills it had when the switch started.
    expect(await simMetric(p1!, 'agentix_sim_kv_handoffs_total{side="prefill",outcome="held"}')).toBeLessThanOrEqual(heldBefore + draining);

    await waitFor(() => p.dispatcher.engineRoles().find((e) => e.id === "p1")?.role === "decode", "p1 flipped to decode");
    const roles = (await (await operatorGet(p.url, "/roles")).json()) as {
      controller: string;
      engines: { id: string; role: string; switching_to: string | null; finishing_from: string | null; switch_mode: string }[];
    };
    expect(roles.controller).toBe("off");
    expect(roles.engines.map((e) => [e.id, e.role, e.switching_to, e.finishing_from, e.switch_mode])).toEqual([
      ["p1", "decode", null, null, "drain"],
      ["p2", "prefill", null, null, "overlap"],
      ["d1", "decode", null, null, "overlap"],
    ]);
    const metrics = await (await operatorGet(p.url, "/metrics")).text();
    expect(metricValue(metrics, 'agentix_role_switches_total{from="prefill",to="decode",mode="drain"}')).toBe(1);
    expect(metricValue(metrics, 'agentix_pool_engine_role{engine="p1",role="decode",switching_to=""}')).toBe(1);

    // As a decode engine it now takes decodes: with d1 busy, some of a second batch decode on p1.
    const more = await Promise.all(Array.from({ length: 8 }, () => streamedCall(p, 40)));
    expect(more.every((r) => r.status === 200 && r.done)).toBe(true);
    expect(await simMetric(p1!, 'agentix_sim_kv_handoffs_total{side="decode",outcome="imported"}')).toBeGreaterThan(0);
  });

  it("overlaps a decode engine switched to prefill mid-stream: new calls are prefilled on it while its decodes stream on, and no call is lost", async () => {
    const [p1, d1, d2] = await engines(["sim-p1", "sim-d1", "sim-d2"], 1);
    const p = await pool({
      engines: [
        // p1 takes two calls at a time, so new calls need the engine switched to prefill.
        { id: "p1", url: p1!.url, role: "prefill", profile: "llama-3.1-8b-h100", maxInFlight: 2 },
        { id: "d1", url: d1!.url, role: "decode", profile: "llama-3.1-8b-h100" },
        { id: "d2", url: d2!.url, role: "decode", profile: "llama-3.1-8b-h100" },
      ],
    });
    const d1Role = () => p.dispatcher.engineRoles().find((e) => e.id === "d1")!;
    const prefillsOnD1 = () => simMetric(d1!, 'agentix_sim_kv_handoffs_total{side="prefill",outcome="held"}');
    // Long answers: their decodes stream for seconds.
    const first = Array.from({ length: 8 }, () => streamedCall(p, 300));
    await waitFor(() => d1Role().inFlight >= 2, "decodes streaming on d1", 10_000);
    const decodesAtSwitch = d1Role().inFlight;
    expect(p.dispatcher.startRoleSwitch({ engineId: "d1", from: "decode", to: "prefill", reason: "test" })).toBe(true);
    // It prefills from now on, and still finishes its decodes.
    expect(d1Role()).toMatchObject({ role: "prefill", switchingTo: undefined, finishingFrom: "decode", switchMode: "overlap" });
    const second = Array.from({ length: 8 }, () => streamedCall(p, 20));
    // New calls are prefilled on d1 while its old decodes still stream there (a drain would give it nothing until they ended).
    let finishingWhenPrefilled: string | undefined = "not prefilled";
    await waitFor(async () => {
      const finishing = d1Role().finishingFrom;
      if ((await prefillsOnD1()) === 0) return false;
      finishingWhenPrefilled = finishing;
      return true;
    }, "a prefill on d1", 10_000);
    expect(finishingWhenPrefilled).toBe("decode");
    expect(decodesAtSwitch).toBeGreaterThan(0);

    const results = await Promise.all([...first, ...second]);
    expect(results.slice(0, 8).every((r) => r.status === 200 && r.done && r.words === 300)).toBe(true);
    expect(results.slice(8).every((r) => r.status === 200 && r.done && r.words === 20)).toBe(true);
    await waitFor(() => d1Role().finishingFrom === undefined, "d1's old decodes done");
    const metrics = await (await operatorGet(p.url, "/metrics")).text();
    expect(metricValue(metrics, 'agentix_pool_role_switches_started_total{from="decode",to="prefill",mode="overlap"}')).toBe(1);
    expect(metricValue(metrics, 'agentix_role_switches_total{from="decode",to="prefill",mode="overlap"}')).toBe(1);
    expect(d1Role()).toMatchObject({ role: "prefill", finishingFrom: undefined, inFlight: 0 });
  }, 30_000);

  it("prices the prefill work the role controller sees by what the prefill engine reported cached", async () => {
    const [p1, d1] = await engines(["sim-p1", "sim-d1"], 5);
    // A round far off: the test closes the meter's window itself.
    const p = await pool({
      engines: [
        { id: "p1", url: p1!.url, role: "prefill", profile: "llama-3.1-8b-h100" },
        { id: "d1", url: d1!.url, role: "decode", profile: "llama-3.1-8b-h100" },
      ],
      roles: { controller: "ratio", roundMs: 600_000 },
    });
    // The pool prices each prefill as its whole prompt; after the first, the engine finds the shared prompt cached.
    for (let i = 0; i < 4; i++) expect((await streamedCall(p, 4, `${PROMPT} question ${i}`)).status).toBe(200);
    p.roleControl!.round();
    expect(p.roleControl!.meter.prefillCostFactor).toBeLessThan(0.6);
  });

  it("runs the configured controller: a prefill queue past the threshold moves a decode engine to prefill, every call answered", async () => {
    const [p1, d1, d2] = await engines(["sim-p1", "sim-d1", "sim-d2"], 1);
    const p = await pool({
      engines: [
        { id: "p1", url: p1!.url, role: "prefill", profile: "llama-3.1-8b-h100", maxInFlight: 1 },
        { id: "d1", url: d1!.url, role: "decode", profile: "llama-3.1-8b-h100" },
        { id: "d2", url: d2!.url, role: "decode", profile: "llama-3.1-8b-h100" },
      ],
      roles: { controller: "threshold", roundMs: 100, cooldownMs: 0 },
    });
    expect(p.roleControl).toBeDefined();
    const results = await Promise.all(Array.from({ length: 14 }, () => streamedCall(p, 8)));
    expect(results.every((r) => r.status === 200 && r.done && r.words === 8)).toBe(true);
    const metrics = await (await operatorGet(p.url, "/metrics")).text();
    expect(metricValue(metrics, 'agentix_role_switches_total{from="decode",to="prefill",mode="overlap"}')).toBe(1);
    expect(p.dispatcher.engineRoles().filter((e) => e.role === "prefill")).toHaveLength(2);
  });
});
