import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessagesResponse } from "../../src/protocol/messages.js";
import { POOL_PATHS } from "../../src/protocol/signing.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { signedCall, testConfig, waitFor } from "./helpers.js";

/*
 * Issue 12: Anthropic's count_tokens at the pool, counted by an engine (not queued):
 * an engine that serves Messages natively is asked its /v1/messages/count_tokens, a
 * vLLM engine that does not is asked /tokenize with the chat messages it would get;
 * either count is the prompt the call is then billed for. An engine that cannot count
 * leaves the pool answering 501, and the edge its estimate.
 */

let engine: SimEngineHandle;
const pools: Record<"native" | "tokenize" | "none", PoolHandle | undefined> = { native: undefined, tokenize: undefined, none: undefined };

beforeAll(async () => {
  engine = await startSimEngine({ timeScale: 1_000 });
  const start = (kind: "vllm" | "openai", nativeApis: ("messages" | "responses")[]) =>
    startPool(testConfig({ engines: [{ id: "sim-c", url: engine.url, kind, nativeApis }], models: [DEFAULT_SIM_MODEL] }));
  pools.native = await start("vllm", ["messages"]);
  pools.tokenize = await start("vllm", []);
  pools.none = await start("openai", []);
  for (const pool of Object.values(pools)) await waitFor(() => pool!.dispatcher.hasHealthyEngine(), "a healthy engine");
});
afterAll(async () => {
  for (const pool of Object.values(pools)) await pool?.close();
  await engine?.close();
});

const request = {
  model: DEFAULT_SIM_MODEL,
  system: "You are terse.",
  messages: [
    { role: "user", content: "List the files in the repository and say which is largest." },
    { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls -la" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a.txt 10\nb.txt 2000" }] },
  ],
  tools: [{ name: "bash", description: "Run a command", input_schema: { type: "object", properties: { command: { type: "string" } } } }],
};

async function signedPost(pool: PoolHandle, path: typeof POOL_PATHS.countTokens | typeof POOL_PATHS.messages, body: unknown): Promise<Response> {
  const call = await signedCall({ path, fields: { program: "prog_counttokens01" }, body });
  return fetch(`${pool.url}${path}`, { method: "POST", headers: call.headers, body: call.body });
}

describe("POST /v1/messages/count_tokens at the pool", () => {
  it("is the prompt the call is billed for, whether the engine counts natively or by /tokenize", async () => {
    const billed = MessagesResponse.parse(await (await signedPost(pools.tokenize!, POOL_PATHS.messages, { ...request, max_tokens: 4 })).json()).usage;
    const prompt = billed.input_tokens + (billed.cache_read_input_tokens ?? 0) + (billed.cache_creation_input_tokens ?? 0);
    for (const pool of [pools.native!, pools.tokenize!]) {
      const res = await signedPost(pool, POOL_PATHS.countTokens, request);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ input_tokens: prompt });
    }
  });

  it("answers 501 token_count_unavailable when no engine can count, and refuses an unsigned request", async () => {
    const res = await signedPost(pools.none!, POOL_PATHS.countTokens, request);
    expect(res.status).toBe(501);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("token_count_unavailable");
    const unsigned = await fetch(`${pools.native!.url}${POOL_PATHS.countTokens}`, { method: "POST", body: JSON.stringify(request) });
    expect(unsigned.status).toBe(401);
  });
});
