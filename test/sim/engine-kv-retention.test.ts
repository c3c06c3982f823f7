import { afterEach, describe, expect, it } from "vitest";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { KV_RETENTION_PATH, KV_RETENTION_TAG_FIELD, KvRetentionAccepted } from "../../src/protocol/kv-retention.js";
import { renderPrompt, tokenize } from "../../src/protocol/tokens.js";
import { type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { HostKvTier } from "../../src/sim/host-kv-tier.js";
import { KV_LINKS } from "../../src/sim/kv-links.js";
import { smallProfile } from "./model-helpers.js";

const MODEL = "sim-llama-3.1-8b";
/**
 * 40 blocks (640 tokens): three 154-token contexts (9 whole blocks and a partial one
 * each) fit, then a 494-token flood needs 31 blocks: the 10 never used and 21 more.
 */
const PROFILE = smallProfile(40);

const contextMessages = (letter: string) => [{ role: "user" as const, content: `${letter}`.repeat(600) }];
const contexts = { a: contextMessages("a"), b: contextMessages("b"), u: contextMessages("u") };
const wholeBlockTokens = (messages: { role: "user"; content: string }[]) => Math.floor(tokenize(renderPrompt({ messages })).length / 16) * 16;

function post(engine: SimEngineHandle, path: string, body: unknown): Promise<Response> {
  return fetch(`${engine.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function chat(engine: SimEngineHandle, messages: { role: "user"; content: string }[], tag?: string): Promise<void> {
  const res = await post(engine, "/v1/chat/completions", { model: MODEL, messages, max_tokens: 1, ...(tag ? { [KV_RETENTION_TAG_FIELD]: tag } : {}) });
  expect(res.status).toBe(200);
  await res.json();
}

async function metricValue(engine: SimEngineHandle, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${engine.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

/** Tagged contexts a and b and untagged u finish; `hint` runs; a flood presses the KV cache; what each keeps on the GPU. */
async function underPressure(engine: SimEngineHandle, hint: () => Promise<void>) {
  await chat(engine, contexts.a, "prog_1:main:0");
  await chat(engine, contexts.b, "prog_2:main:0");
  await chat(engine, contexts.u);
  await hint();
  await chat(engine, [{ role: "user", content: "z".repeat(1_960) }]);
  const cached = (messages: { role: "user"; content: string }[]) => engine.model.cachedPrefixTokens(tokenize(renderPrompt({ messages })));
  return { a: cached(contexts.a), b: cached(contexts.b), u: cached(contexts.u) };
}

describe(`simulated engine: KV retention hints (${KV_RETENTION_PATH}) and the host tier`, () => {
  let engine: SimEngineHandle | undefined;
  afterEach(async () => {
    await engine?.close();
    engine = undefined;
  });

  it("without hints the oldest contexts go first (plain LRU)", async () => {
    engine = await startSimEngine({ timeScale: Number.POSITIVE_INFINITY, profile: PROFILE });
    const cached = await underPressure(engine, async () => {});
    expect(cached.a).toBe(0);
    expect(cached.b).toBe(0);
    expect(cached.u).toBeGreaterThan(0);
  });

  it("a kept context survives pressure that evicts an untagged one; a dropped one goes first", async () => {
    engine = await startSimEngine({ timeScale: Number.POSITIVE_INFINITY, profile: PROFILE });
    const running = engine;
    const cached = await underPressure(running, async () => {
      const res = await post(running, KV_RETENTION_PATH, {
        hints: [
          { action: "keep", tag: "prog_1:main:0", keep_ms: 60_000 },
          { action: "drop", tag: "prog_2:main:0" },
          { action: "drop", tag: "prog_9:main:0" },
        ],
      });
      expect(res.status).toBe(200);
      // The third names a context the engine never held.
      expect(KvRetentionAccepted.parse(await res.json())).toEqual({ applied: 2 });
    });
    // The flood took b's 9 dropped blocks, the 10 unused, the three partial blocks and u's 9: a is whole.
    expect(cached.a).toBe(wholeBlockTokens(contexts.a));
    expect(cached.b).toBe(0);
    expect(cached.u).toBe(0);
    expect(await metricValue(running, "agentix:kv_retention_keeps_applied_total")).toBe(1);
    expect(await metricValue(running, "agentix:kv_retention_drops_applied_total")).toBe(1);
  });

  it("refuses a malformed batch with a 400 in OpenAI's shape and changes nothing", async () => {
    engine = await startSimEngine({ timeScale: Number.POSITIVE_INFINITY, profile: PROFILE });
    const cases: [unknown, string | null][] = [
      [{ hints: [] }, "hints"],
      [{ hints: [{ action: "keep", tag: "p:main:0" }] }, "hints.0.keep_ms"],
      [{ hints: [{ action: "keep", tag: "p:main:0", keep_ms: 400_000 }] }, "hints.0.keep_ms"],
      [{ hints: [{ action: "drop", tag: "not a tag!" }] }, "hints.0.tag"],
      [{ hints: [{ action: "evict", tag: "p:main:0" }] }, "hints.0.action"],
    ];
    for (const [body, param] of cases) {
      const res = await post(engine, KV_RETENTION_PATH, body);
      expect(res.status).toBe(400);
      const error = OpenAIErrorBody.parse(await res.json()).error;
      expect(error.type).toBe("invalid_request_error");
      expect(error.param).toBe(param);
    }
    const notJson = await post(engine, KV_RETENTION_PATH, "{");
    expect(notJson.status).toBe(400);
    expect(OpenAIErrorBody.parse(await notJson.json()).error.code).toBe("invalid_json");
    const badTag = await post(engine, "/v1/chat/completions", { model: MODEL, messages: contexts.a, max_tokens: 1, [KV_RETENTION_TAG_FIELD]: "" });
    expect(badTag.status).toBe(400);
    expect(engine.model.stats().keepsApplied + engine.model.stats().dropsApplied).toBe(0);
  });

  it("with a host tier, the evicted untagged context comes back from host memory, counted in /metrics", async () => {
    const hostTier = new HostKvTier({ link: KV_LINKS["llama-3.1-8b-h100"], blockSize: 16, capacityBlocks: 256 });
    engine = await startSimEngine({ timeScale: Number.POSITIVE_INFINITY, profile: PROFILE, hostTier });
    const running = engine;
    const cached = await underPressure(running, async () => {
      const hints = [
        { action: "keep", tag: "prog_1:main:0", keep_ms: 60_000 },
        { action: "drop", tag: "prog_2:main:0" },
      ];
      await post(running, KV_RETENTION_PATH, { hints });
    });
    expect(cached.u).toBe(0);
    await chat(running, contexts.u);
    expect(await metricValue(running, "agentix:kv_host_hit_tokens_total")).toBe(wholeBlockTokens(contexts.u));
    expect(await metricValue(running, "agentix:kv_recomputed_tokens_total")).toBe(0);
    expect(await metricValue(running, "agentix:kv_host_load_bytes_total")).toBe(wholeBlockTokens(contexts.u) * 128 * 1024);
    // The dropped context was never written to host memory: asking for it again recomputes it.
    await chat(running, contexts.b);
    expect(await metricValue(running, "agentix:kv_recomputed_tokens_total")).toBe(wholeBlockTokens(contexts.b));
  });
});
