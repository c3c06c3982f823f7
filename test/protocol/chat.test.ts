import { describe, expect, it } from "vitest";
import { ChatCompletionRequest, requestedMaxTokens } from "../../src/protocol/chat.js";
import { invalidRequest } from "../../src/protocol/errors.js";
import { estimatePromptTokens, tokenize } from "../../src/protocol/tokens.js";

const base = { model: "m", messages: [{ role: "user", content: "hello" }] };

describe("chat request schema", () => {
  it("keeps unknown fields for the engine", () => {
    const parsed = ChatCompletionRequest.parse({ ...base, logprobs: true, messages: [{ role: "user", content: "x", extra: 1 }] });
    expect(parsed.logprobs).toBe(true);
    expect(parsed.messages[0]?.extra).toBe(1);
  });

  it.each([
    [{ model: "m" }, "messages"],
    [{ ...base, messages: [] }, "messages"],
    [{ ...base, messages: [{ role: "robot", content: "x" }] }, "messages.0.role"],
    [{ ...base, max_tokens: "10" }, "max_tokens"],
    [{ ...base, temperature: 3 }, "temperature"],
    [{ ...base, model: 5 }, "model"],
  ])("rejects %j naming %s", async (body, param) => {
    const result = ChatCompletionRequest.safeParse(body);
    expect(result.success).toBe(false);
    if (result.success) return;
    const response = invalidRequest(result.error).getResponse();
    expect(response.status).toBe(400);
    const json = (await response.json()) as { error: { param: string; type: string } };
    expect(json.error.param).toBe(param);
    expect(json.error.type).toBe("invalid_request_error");
  });

  it("prefers max_completion_tokens over max_tokens", () => {
    expect(requestedMaxTokens(ChatCompletionRequest.parse({ ...base, max_tokens: 5, max_completion_tokens: 7 }))).toBe(7);
    expect(requestedMaxTokens(ChatCompletionRequest.parse({ ...base, max_tokens: 5 }))).toBe(5);
    expect(requestedMaxTokens(ChatCompletionRequest.parse(base))).toBeUndefined();
  });

  it("counts prompt tokens consistently with tokenize", () => {
    const req = ChatCompletionRequest.parse({ ...base, messages: [{ role: "system", content: "a".repeat(100) }, ...base.messages] });
    const rendered = tokenize(`<|system|>${"a".repeat(100)}<|end|>\n<|user|>hello<|end|>\n`);
    expect(estimatePromptTokens(req)).toBe(rendered.length);
  });
});
