import { describe, expect, it } from "vitest";
import { retryIdempotent } from "../../src/edge/chat/idempotent-retry.js";

describe("retryIdempotent", () => {
  it("tries again after each delay until the operation succeeds", async () => {
    let calls = 0;
    const retries: number[] = [];
    const result = await retryIdempotent(
      async () => {
        calls += 1;
        if (calls < 3) throw new Error(`transient ${calls}`);
        return "settled";
      },
      [1, 1, 1],
      (_error, attempt) => retries.push(attempt),
    );
    expect(result).toBe("settled");
    expect(calls).toBe(3);
    expect(retries).toEqual([1, 2]);
  });

  it("gives up with the last error once the delays are spent", async () => {
    let calls = 0;
    await expect(
      retryIdempotent(async () => {
        calls += 1;
        throw new Error(`down ${calls}`);
      }, [1, 1]),
    ).rejects.toThrow("down 3");
    expect(calls).toBe(3);
  });
});
