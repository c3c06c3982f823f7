import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Header } from "../../../src/protocol/headers.js";
import { type LocalStackHandle, localUsageRows, readChatStream, waitFor } from "../stack.js";

/*
 * The real stack: the Worker under `wrangler dev` (local D1 and Durable Objects),
 * a pool core and simulated engines, driven by the official OpenAI client with
 * only the base URL, the key and the program header changed.
 */

export function describeOpenAiSdk(local: LocalStackHandle): void {
  const UsageRow = z.object({
    call_id: z.string(),
    program_id: z.string(),
    prompt_tokens: z.number(),
    cached_tokens: z.number(),
    completion_tokens: z.number(),
    service_ms: z.number(),
    status: z.string(),
  });
  type UsageRow = z.infer<typeof UsageRow>;

  const usageRows = (programId: string): Promise<UsageRow[]> => localUsageRows(local.stateDir, programId, UsageRow);

  const ProgramView = z.object({
    id: z.string(),
    status: z.string(),
    service_ms: z.number(),
    path_ms: z.number(),
    engine: z.string().nullable(),
    totals: z.object({ calls: z.number(), prompt_tokens: z.number(), completion_tokens: z.number() }),
  });

  async function program(id: string) {
    const res = await fetch(`${local.stack.edgeUrl}/v1/programs/${id}`, { headers: { authorization: `Bearer ${local.stack.devKey}` } });
    expect(res.status).toBe(200);
    return ProgramView.parse(await res.json());
  }

  describe("end to end through edge, pool and simulated engines", () => {
    it("serves a program's non-streaming and streaming calls and meters each exactly once", async () => {
      const client = new OpenAI({ baseURL: `${local.stack.edgeUrl}/v1`, apiKey: local.stack.devKey, maxRetries: 0 });
      const messages: OpenAI.ChatCompletionMessageParam[] = [
        { role: "system", content: "You are a coding agent. ".repeat(40) },
        { role: "user", content: "List the failing tests." },
      ];

      const first = await client.chat.completions.create({ model: local.stack.model, messages, max_tokens: 24 }).withResponse();
      const programId = first.response.headers.get(Header.program);
      expect(programId).toMatch(/^prog_/);
      expect(first.data.usage?.completion_tokens).toBeGreaterThan(0);
      const afterFirst = await waitFor(
        () => program(programId ?? ""),
        (p) => p.totals.calls === 1,
      );
      expect(afterFirst.totals.calls).toBe(1);
      expect(afterFirst.service_ms).toBeGreaterThan(0);
      expect(afterFirst.engine).toMatch(/^[a-z-]+-sim-\d+$/);

      messages.push({ role: "assistant", content: first.data.choices[0]?.message.content ?? "" });
      messages.push({ role: "user", content: "Fix the first one." });
      const stream = await client.chat.completions
        .create(
          { model: local.stack.model, messages, max_tokens: 16, stream: true, stream_options: { include_usage: true } },
          { headers: { [Header.program]: programId ?? "" } },
        )
        .withResponse();
      expect(stream.response.headers.get(Header.program)).toBe(programId);
      const { text, usage: streamedUsage } = await readChatStream(stream.data);
      expect(text.length).toBeGreaterThan(0);
      expect(streamedUsage?.completion_tokens).toBeGreaterThan(0);
      // The second call re-sends the first one's prompt: the engine's prefix cache serves part of it.
      expect(streamedUsage?.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);

      const afterSecond = await waitFor(
        () => program(programId ?? ""),
        (p) => p.totals.calls === 2,
      );
      expect(afterSecond.totals.calls).toBe(2);
      expect(afterSecond.service_ms).toBeGreaterThan(afterFirst.service_ms);
      expect(afterSecond.path_ms).toBeCloseTo(afterSecond.service_ms, 6);

      const rows = await waitFor(
        () => usageRows(programId ?? ""),
        (r) => r.length >= 2,
      );
      expect(rows).toHaveLength(2);
      expect(new Set(rows.map((r) => r.call_id)).size).toBe(2);
      const expected = [first.data.usage, streamedUsage];
      rows.forEach((row, i) => {
        expect(row.status).toBe("ok");
        expect(row.prompt_tokens).toBe(expected[i]?.prompt_tokens);
        expect(row.completion_tokens).toBe(expected[i]?.completion_tokens);
        expect(row.cached_tokens).toBe(expected[i]?.prompt_tokens_details?.cached_tokens ?? 0);
      });
      expect(afterSecond.totals.prompt_tokens).toBe(rows.reduce((sum, r) => sum + r.prompt_tokens, 0));
    });

    it("keeps the usage chunk out of a stream that did not ask for it", async () => {
      const client = new OpenAI({ baseURL: `${local.stack.edgeUrl}/v1`, apiKey: local.stack.devKey, maxRetries: 0 });
      const stream = await client.chat.completions.create({
        model: local.stack.model,
        messages: [{ role: "user", content: "hello" }],
        max_tokens: 4,
        stream: true,
      });
      const chunks: OpenAI.ChatCompletionChunk[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      expect(chunks.length).toBeGreaterThan(0);
      expect(chunks.every((c) => c.choices.length > 0 && !c.usage)).toBe(true);
    });

    it("serves the legacy completions API through the SDK, streaming and not, in one program, each call metered as api completions", async () => {
      const client = new OpenAI({ baseURL: `${local.stack.edgeUrl}/v1`, apiKey: local.stack.devKey, maxRetries: 0 });
      const whole = await client.completions.create({ model: local.stack.model, prompt: "def fib(n):", max_tokens: 8 }).withResponse();
      expect(whole.data.object).toBe("text_completion");
      expect(whole.data.choices[0]?.text.length).toBeGreaterThan(0);
      expect(whole.data.usage?.completion_tokens).toBe(8);
      const programId = whole.response.headers.get(Header.program)!;
      const stream = await client.completions.create(
        { model: local.stack.model, prompt: "def fib(n):", max_tokens: 6, stream: true, stream_options: { include_usage: true } },
        { headers: { [Header.program]: programId } },
      );
      let streamedUsage: OpenAI.CompletionUsage | undefined;
      let text = "";
      for await (const chunk of stream) {
        text += chunk.choices[0]?.text ?? "";
        if (chunk.usage) streamedUsage = chunk.usage;
      }
      expect(text.length).toBeGreaterThan(0);
      expect(streamedUsage?.completion_tokens).toBe(6);
      const rows = await waitFor(
        () => localUsageRows(local.stateDir, programId, UsageRow.extend({ api: z.string() })),
        (found) => found.length === 2,
      );
      expect(rows.map((r) => [r.api, r.status, r.completion_tokens])).toEqual([
        ["completions", "ok", 8],
        ["completions", "ok", 6],
      ]);
    });

    it("serves the Responses API through the SDK: a previous_response_id chain joins one program, streaming and not", async () => {
      const client = new OpenAI({ baseURL: `${local.stack.edgeUrl}/v1`, apiKey: local.stack.devKey, maxRetries: 0 });
      const first = await client.responses
        .create({ model: local.stack.model, instructions: "You are a coding agent.", input: "List the files.", max_output_tokens: 8 })
        .withResponse();
      expect(first.data.object).toBe("response");
      expect(first.data.output_text.length).toBeGreaterThan(0);
      expect(first.data.usage?.output_tokens).toBe(8);
      const programId = first.response.headers.get(Header.program)!;
      expect(first.response.headers.get(Header.programSource)).toBe("new");

      // No program header: previous_response_id alone puts the call in the first one's program.
      const stream = await client.responses.create({ model: local.stack.model, input: "Now run the tests.", previous_response_id: first.data.id, max_output_tokens: 6, stream: true });
      let completed: OpenAI.Responses.Response | undefined;
      for await (const event of stream) if (event.type === "response.completed" || event.type === "response.incomplete") completed = event.response;
      expect(completed?.usage?.output_tokens).toBe(6);

      const third = await client.responses.create({ model: local.stack.model, input: "Summarise.", previous_response_id: completed!.id, max_output_tokens: 4 }).withResponse();
      expect(third.response.headers.get(Header.program)).toBe(programId);
      expect(third.response.headers.get(Header.programSource)).toBe("previous_response_id");
      // The engine saw the whole conversation: more prompt tokens at each turn.
      expect(third.data.usage!.input_tokens).toBeGreaterThan(first.data.usage!.input_tokens);

      const rows = await waitFor(
        () => localUsageRows(local.stateDir, programId, UsageRow.extend({ api: z.string() })),
        (found) => found.length === 3,
      );
      expect(rows.map((r) => [r.api, r.status, r.completion_tokens])).toEqual([
        ["responses", "ok", 8],
        ["responses", "ok", 6],
        ["responses", "ok", 4],
      ]);
    });

    it("rejects a wrong key with OpenAI's error shape through the SDK", async () => {
      const client = new OpenAI({ baseURL: `${local.stack.edgeUrl}/v1`, apiKey: "agx_wrong", maxRetries: 0 });
      const error = await client.chat.completions
        .create({ model: local.stack.model, messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
      expect((error as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe("invalid_api_key");
    });
  });
}
