import { describe, expect, it } from "vitest";
import { adapterFor } from "../../src/pool/engines/index.js";
import { ChatCompletionRequest } from "../../src/protocol/chat.js";

const body = { model: "client-model", messages: [{ role: "user", content: "hi" }], priority: -100, foo: { bar: 1 } };
const position = { api: "chat", level: 2, levels: 10 } as const;

describe("engine adapters", () => {
  it("vLLM: priority = queue level (lower runs first)", () => {
    expect(adapterFor("vllm").buildBody(body, position).priority).toBe(2);
    expect(adapterFor("vllm").buildBody(body, { api: "chat", level: 0, levels: 10 }).priority).toBe(0);
  });

  it("SGLang: priority inverted (higher runs first)", () => {
    expect(adapterFor("sglang").buildBody(body, position).priority).toBe(7);
    expect(adapterFor("sglang").buildBody(body, { api: "chat", level: 0, levels: 10 }).priority).toBe(9);
    expect(adapterFor("sglang").buildBody(body, { api: "chat", level: 9, levels: 10 }).priority).toBe(0);
  });

  it("OpenAI-compatible: no priority, and a client's own priority is dropped", () => {
    expect(adapterFor("openai").buildBody(body, position)).not.toHaveProperty("priority");
  });

  it("keeps unknown fields, applies the model override, and leaves the client body untouched", () => {
    const out = adapterFor("vllm").buildBody(body, { ...position, model: "engine-model" });
    expect(out).toMatchObject({ model: "engine-model", foo: { bar: 1 }, messages: body.messages });
    expect(body.model).toBe("client-model");
    expect(body.priority).toBe(-100);
  });

  it("copies a body without a priority of its own: same keys in the same order, the client's body untouched", () => {
    const plain = { model: "client-model", messages: [{ role: "user", content: "hi" }], foo: { bar: 1 } };
    const out = adapterFor("vllm").buildBody(plain, { ...position, model: "engine-model" });
    expect(Object.keys(out)).toEqual(["model", "messages", "foo", "priority"]);
    expect(out).toMatchObject({ model: "engine-model", priority: 2 });
    expect(plain).toEqual({ model: "client-model", messages: [{ role: "user", content: "hi" }], foo: { bar: 1 } });
    expect(Object.keys(adapterFor("vllm").buildBody(body, position))).toEqual(["model", "messages", "foo", "priority"]);
  });

  it("sends a parsed request as the edge sent it, with the engine's fields added after, and never writes into it", () => {
    for (const stream of [false, true]) {
      // As the pool holds a call's body: zod's output of the request the edge sent.
      const parsed = ChatCompletionRequest.parse(JSON.parse(JSON.stringify({ model: "client-model", messages: [{ role: "user", content: "hi" }], stream, max_tokens: 16, ignore_eos: true })));
      const before = JSON.stringify(parsed);
      const out = adapterFor("vllm").buildBody(parsed, { ...position, model: "engine-model" });
      const streamOptions = stream ? ',"stream_options":{"include_usage":true,"continuous_usage_stats":true}' : "";
      expect(JSON.stringify(out)).toBe(
        `{"model":"engine-model","messages":[{"role":"user","content":"hi"}],"stream":${stream},"max_tokens":16,"ignore_eos":true,"priority":2${streamOptions}}`,
      );
      expect(out).not.toBe(parsed);
      out.extra = 1;
      expect(JSON.stringify(parsed)).toBe(before);
    }
  });

  it("forces include_usage on streams, keeping other stream options", () => {
    const streaming = { ...body, stream: true, stream_options: { include_usage: false, other: 1 } };
    expect(adapterFor("openai").buildBody(streaming, position).stream_options).toEqual({ include_usage: true, other: 1 });
    expect(adapterFor("vllm").buildBody(body, position)).not.toHaveProperty("stream_options");
  });

  it("asks vLLM and SGLang, not a plain OpenAI server, for usage on every chunk", () => {
    const streaming = { ...body, stream: true };
    for (const kind of ["vllm", "sglang"] as const) {
      expect(adapterFor(kind).continuousUsage).toBe(true);
      expect(adapterFor(kind).buildBody(streaming, position).stream_options).toEqual({ include_usage: true, continuous_usage_stats: true });
      expect(adapterFor(kind).buildBody(body, position)).not.toHaveProperty("stream_options");
    }
    expect(adapterFor("openai").continuousUsage).toBe(false);
    expect(adapterFor("openai").buildBody(streaming, position).stream_options).toEqual({ include_usage: true });
  });

  it("leaves stream_options out of Messages and Responses bodies (their streams carry usage in their own events)", () => {
    for (const api of ["messages", "responses"] as const) {
      for (const kind of ["vllm", "sglang", "openai"] as const) {
        const out = adapterFor(kind).buildBody({ model: "m", stream: true }, { ...position, api });
        expect(out).not.toHaveProperty("stream_options");
        expect(out.stream).toBe(true);
      }
    }
    expect(adapterFor("vllm").buildBody({ model: "m", stream: true }, { ...position, api: "responses" }).priority).toBe(2);
  });
});
