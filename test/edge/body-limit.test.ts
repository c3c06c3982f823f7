import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { chat, chatBody, drain, edge, expectOpenAIError, mockPool, newLimitedTenant, poolJson } from "./support";

/*
 * Issue 9, item 6: the edge takes bodies up to 16 MiB by default (long agent contexts),
 * counted as the bytes arrive, and answers 413 past it.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const MIB = 1_048_576;
const DEFAULT_LIMIT = 16 * MIB;

/** A chat body of exactly `bytes` bytes (ASCII). */
function bodyOf(bytes: number): string {
  const shell = chatBody({ messages: [{ role: "user", content: "" }] });
  return chatBody({ messages: [{ role: "user", content: "x".repeat(bytes - shell.length) }] });
}

/** A body streamed in 64 KiB pieces without Content-Length; counts what the edge pulled. */
function streamed(body: string) {
  const bytes = new TextEncoder().encode(body);
  let pulled = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled >= bytes.byteLength) return controller.close();
      const piece = bytes.subarray(pulled, pulled + 64 * 1024);
      pulled += piece.byteLength;
      controller.enqueue(piece);
    },
  });
  return { stream, pulled: () => pulled };
}

describe("the request body limit", () => {
  it("is 16 MiB in wrangler.toml and by default", async () => {
    expect(Number(env.MAX_BODY_BYTES)).toBe(DEFAULT_LIMIT);
    const pool = mockPool(() => poolJson());
    // A 4M-token prompt needs a tenant whose per-minute tokens and budget can hold it.
    const tenant = await newLimitedTenant({ tpm: 100_000_000, monthly_token_budget: 1_000_000_000 });
    const unset = { ...env, MAX_BODY_BYTES: undefined };

    // Over the old 1 MiB default, and exactly at the new one: accepted, streamed or not.
    expect((await chat(tenant, bodyOf(2 * MIB))).status).toBe(200);
    const atLimit = streamed(bodyOf(DEFAULT_LIMIT));
    const res = await chat(tenant, undefined, {}, { body: atLimit.stream, duplex: "half" } as RequestInit);
    expect(res.status).toBe(200);
    expect(pool).toHaveLength(2);
    await drain();

    // One byte more: 413, by Content-Length, with the var set or unset (the code's default).
    const over = bodyOf(DEFAULT_LIMIT + 1);
    await expectOpenAIError(await chat(tenant, over), 413);
    const unsetCall = (body: string) =>
      edge(
        "/v1/chat/completions",
        { method: "POST", body, headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json" } },
        unset,
      );
    expect((await expectOpenAIError(await unsetCall(over), 413)).error.code).toBe("request_too_large");
    expect((await unsetCall(bodyOf(DEFAULT_LIMIT))).status).toBe(200);
    expect(pool).toHaveLength(3);
    await drain();

    // …and by counting a stream without Content-Length, cut off rather than read to its end.
    const overStream = streamed(bodyOf(DEFAULT_LIMIT + 256 * 1024));
    const cut = await chat(tenant, undefined, {}, { body: overStream.stream, duplex: "half" } as RequestInit);
    expect((await expectOpenAIError(cut, 413)).error.code).toBe("request_too_large");
    expect(overStream.pulled()).toBeLessThan(DEFAULT_LIMIT + 256 * 1024);
    expect(pool).toHaveLength(3);
    // ~64 MiB through the local runtime: past vitest's 5 s default on a loaded 2-core machine (seen: 5.7–6.9 s).
  }, 30_000);
});
