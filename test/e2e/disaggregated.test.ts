import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Header } from "../../src/protocol/headers.js";
import { localUsageRows, readChatStream, useLocalStack, waitFor } from "./stack.js";

/*
 * The local stack's disaggregated mode (`npm start -- --prefill 1 --role-controller
 * ratio`, issue 13) for real: the Worker under wrangler, pools whose first simulated
 * engine prefills and whose second decodes, the ratio controller on, and one streamed
 * call from the official OpenAI client. It must be split (prefilled on one engine,
 * decoded from the handed-over KV on the other) and billed once, for the prompt as the
 * prefill engine computed it.
 */

const local = useLocalStack("split", { engines: 2, timeScale: 50, prefillEngines: 1, roleController: "ratio" });

const UsageRow = z.object({ call_id: z.string(), prompt_tokens: z.number(), cached_tokens: z.number(), completion_tokens: z.number(), status: z.string() });

/** One series' value in a Prometheus text page; undefined when absent. */
function metricValue(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function poolMetrics(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${local.stack.poolOperatorToken}` } });
  expect(res.status).toBe(200);
  return res.text();
}

describe("the local stack with disaggregated pools", () => {
  it("splits a streamed SDK call between the prefill and the decode engine and bills it once, for the prompt as prefilled", async () => {
    const client = new OpenAI({ baseURL: `${local.stack.edgeUrl}/v1`, apiKey: local.stack.devKey, maxRetries: 0 });
    // A prompt no engine has seen, several KV blocks long.
    const prompt = `${Date.now()} `.concat(Array.from({ length: 300 }, (_, i) => `word${i % 41}`).join(" "));
    const stream = await client.chat.completions
      .create({ model: local.stack.model, messages: [{ role: "user", content: prompt }], max_tokens: 24, stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const programId = stream.response.headers.get(Header.program) ?? "";
    expect(programId).toMatch(/^prog_/);
    const { text, usage } = await readChatStream(stream.data);
    expect(text.length).toBeGreaterThan(0);
    expect(usage?.completion_tokens).toBeGreaterThan(0);

    // The pool that served it: its prefill engine made one token and computed the whole prompt; its decode engine
    // pulled the prompt's whole blocks (handed over) and made the answer.
    const served = local.stack.pools.find((pool) => pool.engines[0]!.model.stats().generationTokens > 0);
    expect(served).toBeDefined();
    const [prefill, decode] = served!.engines;
    expect(prefill!.model.stats().generationTokens).toBe(1);
    expect(prefill!.model.stats().prefixCacheHits).toBe(0);
    expect(decode!.model.stats().generationTokens).toBe(usage?.completion_tokens);
    expect(decode!.model.stats().remoteKvPulledTokens).toBeGreaterThan(0);
    const metrics = await waitFor(
      () => poolMetrics(served!.url),
      (m) => metricValue(m, `agentix_pool_engine_tokens_total{engine="${decode!.engineId}",kind="completion",outcome="completed"}`) !== undefined,
    );
    expect(metricValue(metrics, 'agentix_pool_split_handoffs_total{outcome="handed_off"}')).toBe(1);
    expect(metricValue(metrics, `agentix_pool_engine_tokens_total{engine="${prefill!.engineId}",kind="prompt",outcome="completed"}`)).toBe(usage?.prompt_tokens);
    expect(metricValue(metrics, `agentix_pool_engine_tokens_total{engine="${decode!.engineId}",kind="completion",outcome="completed"}`)).toBe(usage?.completion_tokens);
    expect(metricValue(metrics, `agentix_pool_engine_role{engine="${prefill!.engineId}",role="prefill",switching_to=""}`)).toBe(1);

    // The client's usage is the prompt as the prefill engine computed it (nothing cached there), not as the decode engine saw it.
    expect(usage?.prompt_tokens_details?.cached_tokens ?? 0).toBe(0);
    // Billed once, with those figures.
    const rows = await waitFor(
      () => localUsageRows(local.stateDir, programId, UsageRow),
      (r) => r.length >= 1,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: "ok", prompt_tokens: usage?.prompt_tokens, cached_tokens: 0, completion_tokens: usage?.completion_tokens });
  });
});
