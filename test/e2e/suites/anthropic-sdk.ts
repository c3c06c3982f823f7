import Anthropic from "@anthropic-ai/sdk";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Header } from "../../../src/protocol/headers.js";
import { type LocalStackHandle, localUsageRows, waitFor } from "../stack.js";

/*
 * Issue 12: Anthropic's official client, unchanged but for its base URL and key,
 * against the real stack (wrangler dev, two pools, simulated engines): messages,
 * streaming, a tool round trip in the history, count_tokens, all in one program,
 * each call metered once as api "messages".
 */

export function describeAnthropicSdk(local: LocalStackHandle): void {
  const UsageRow = z.object({ call_id: z.string(), api: z.string(), status: z.string(), prompt_tokens: z.number(), completion_tokens: z.number() });

  const client = () => new Anthropic({ baseURL: local.stack.edgeUrl, apiKey: local.stack.devKey, maxRetries: 0 });

  const TOOLS: Anthropic.Tool[] = [
    { name: "bash", description: "Run a shell command", input_schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } },
  ];

  describe("Anthropic's SDK against the local stack", () => {
    it("creates messages, streams, replays a tool round trip and counts tokens in one program, metering each call once", async () => {
      const anthropic = client();
      const first = await anthropic.messages
        .create({ model: local.stack.model, max_tokens: 12, system: "You are a coding agent.", messages: [{ role: "user", content: "List the files." }], tools: TOOLS })
        .withResponse();
      expect(first.data.type).toBe("message");
      expect(first.data.content[0]?.type).toBe("text");
      expect(first.data.usage.output_tokens).toBe(12);
      expect(first.data.stop_reason).toBe("max_tokens");
      const programId = first.response.headers.get(Header.program)!;
      expect(programId).toMatch(/^prog_/);
      const inProgram = { headers: { [Header.program]: programId } };

      // The agent ran the tool the model asked for; its result goes back in the history.
      const history: Anthropic.MessageParam[] = [
        { role: "user", content: "List the files." },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "src\ntest\n" }] },
      ];
      const stream = anthropic.messages.stream({ model: local.stack.model, max_tokens: 8, messages: history, tools: TOOLS }, inProgram);
      const kinds: string[] = [];
      for await (const event of stream) kinds.push(event.type);
      const streamed = await stream.finalMessage();
      expect(kinds[0]).toBe("message_start");
      expect(kinds.at(-1)).toBe("message_stop");
      expect(streamed.usage.output_tokens).toBe(8);
      expect(streamed.content.map((b) => b.type)).toEqual(["text"]);

      // Counted by the engine: the prompt the streamed call with the same history and tools was billed for.
      const counted = await anthropic.messages.countTokens({ model: local.stack.model, messages: history, tools: TOOLS }).withResponse();
      expect(counted.response.headers.get(Header.tokenCountSource)).toBe("engine");
      expect(counted.data.input_tokens).toBe(streamed.usage.input_tokens + (streamed.usage.cache_read_input_tokens ?? 0));

      const rows = await waitFor(() => localUsageRows(local.stateDir, programId, UsageRow), (found) => found.length === 2);
      expect(rows.map((r) => [r.api, r.status, r.completion_tokens])).toEqual([
        ["messages", "ok", 12],
        ["messages", "ok", 8],
      ]);
      expect(rows[0]?.prompt_tokens).toBe(first.data.usage.input_tokens + (first.data.usage.cache_read_input_tokens ?? 0));
    });

    it("keeps an agent's calls in one program without any Agentix header: its conversation, or its session's metadata.user_id", async () => {
      const anthropic = client();
      const history: Anthropic.MessageParam[] = [{ role: "user", content: "Plan the refactor." }];
      const first = await anthropic.messages.create({ model: local.stack.model, max_tokens: 6, messages: history }).withResponse();
      const programId = first.response.headers.get(Header.program);
      history.push({ role: "assistant", content: first.data.content }, { role: "user", content: "Go on." });
      // The next call comes at once, as a chat agent's would (no tool run in between).
      const second = await anthropic.messages.create({ model: local.stack.model, max_tokens: 6, messages: history }).withResponse();
      expect(second.response.headers.get(Header.program)).toBe(programId);
      expect(second.response.headers.get(Header.programSource)).toBe("continuation");

      const session = { user_id: "user_e2e_session_42" };
      const s1 = await anthropic.messages.create({ model: local.stack.model, max_tokens: 4, metadata: session, messages: [{ role: "user", content: "one" }] }).withResponse();
      const s2 = await anthropic.messages.create({ model: local.stack.model, max_tokens: 4, metadata: session, messages: [{ role: "user", content: "two" }] }).withResponse();
      expect(s2.response.headers.get(Header.program)).toBe(s1.response.headers.get(Header.program));
      expect(s2.response.headers.get(Header.programSource)).toBe("session_key");
    });

    it("gets Anthropic's errors the SDK understands: a wrong key, an unknown model", async () => {
      const wrong = new Anthropic({ baseURL: local.stack.edgeUrl, apiKey: "agx_wrong", maxRetries: 0 });
      const denied = await wrong.messages.create({ model: local.stack.model, max_tokens: 4, messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
      expect(denied).toBeInstanceOf(Anthropic.AuthenticationError);
      const missing = await client()
        .messages.create({ model: "no-such-model", max_tokens: 4, messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
      expect((missing as InstanceType<typeof Anthropic.NotFoundError>).error).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    });
  });
}
