import { describe, expect, it } from "vitest";
import { KV_LINKS, kvTransferMs } from "../../src/sim/kv-links.js";
import { ENGINE_PROFILES } from "../../src/sim/profiles.js";

describe("KV transfer cost (issue 13)", () => {
  it("has a link profile for every engine profile", () => {
    expect(Object.keys(KV_LINKS).sort()).toEqual(Object.keys(ENGINE_PROFILES).sort());
  });

  it("moves a 10k-token Llama-3.1-8B context in ~2.9 ms over NVLink and ~20 ms over PCIe, far below prefilling it again", () => {
    const link = KV_LINKS["llama-3.1-8b-h100"];
    expect(kvTransferMs(link, 10_000, "engine")).toBeCloseTo((10_000 * 131_072) / 450e9 * 1_000, 6);
    expect(kvTransferMs(link, 10_000, "engine")).toBeCloseTo(2.91, 2);
    expect(kvTransferMs(link, 10_000, "host")).toBeCloseTo(20.48, 2);
    const prefillMs = 10_000 * ENGINE_PROFILES["llama-3.1-8b-h100"].perTokenMs;
    expect(kvTransferMs(link, 10_000, "host")).toBeLessThan(prefillMs / 10);
  });

  it("scales with the model's KV size and the engine's GPU count, and costs nothing for no tokens", () => {
    const tp4 = KV_LINKS["llama-3.1-70b-h100-tp4"];
    // 2.5× the bytes a token over 4× the links.
    expect(kvTransferMs(tp4, 10_000, "engine") / kvTransferMs(KV_LINKS["llama-3.1-8b-h100"], 10_000, "engine")).toBeCloseTo(2.5 / 4, 6);
    expect(kvTransferMs(tp4, 0, "host")).toBe(0);
    expect(kvTransferMs(KV_LINKS["llama-3.1-8b-a100"], 10_000, "host")).toBeCloseTo(40.96, 2);
  });
});
