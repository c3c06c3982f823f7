import { describe, expect, it } from "vitest";
import { DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import { DEFAULT_TAO_SETTINGS, defaultTaoPlacementSettings } from "../../src/core/tao/settings.js";
import { DEFAULT_KV_CAPACITY_TOKENS, parsePoolConfig, PoolConfigError } from "../../src/pool/config.js";

const minimal = { signingSecret: "0123456789abcdef", engines: [{ id: "e1", url: "http://127.0.0.1:8000" }] };

describe("placement config", () => {
  it("defaults to routing, with the core's TAO defaults and the default KV capacity", () => {
    const config = parsePoolConfig(minimal);
    expect(config.placement).toEqual({
      policy: "routing",
      tao: {
        // The core's placement defaults (one source for pool and simulator), plus the plan loop's timings.
        ...defaultTaoPlacementSettings(),
        planIntervalMs: 250,
        replanMinIntervalMs: 10,
      },
    });
    // Unset: the engine's metrics, else the default (the dispatcher resolves it).
    expect(config.engines[0]?.kvCapacityTokens).toBeUndefined();
    expect(DEFAULT_KV_CAPACITY_TOKENS).toBe(26_300 * 16);
  });

  it("takes scheduling.placement and scheduling.tao, leaving scheduling the core's dispatch settings", () => {
    const config = parsePoolConfig({
      ...minimal,
      engines: [{ id: "e1", url: "http://127.0.0.1:8000", kvCapacityTokens: 100_000 }],
      scheduling: {
        placement: "tao",
        tao: { readiness: { readySoonMs: 2_000 }, planner: { quantumTokens: 1_024 }, planIntervalMs: 100, outputAllowanceTokens: 0 },
      },
    });
    expect(config.scheduling).toEqual(DEFAULT_DISPATCH_SETTINGS);
    expect(config.placement.policy).toBe("tao");
    expect(config.placement.tao).toMatchObject({
      tao: {
        readiness: { ...DEFAULT_TAO_SETTINGS.readiness, readySoonMs: 2_000 },
        cacheCredit: DEFAULT_TAO_SETTINGS.cacheCredit,
        planner: { ...DEFAULT_TAO_SETTINGS.planner, quantumTokens: 1_024 },
      },
      planIntervalMs: 100,
      reservationTtlMs: 2_500,
      outputAllowanceTokens: 0,
    });
    expect(config.engines[0]?.kvCapacityTokens).toBe(100_000);
    expect(parsePoolConfig({ ...minimal, scheduling: { placement: "tao", tao: { reservationTtlMs: 0 } } }).placement.tao.reservationTtlMs).toBe(0);
  });

  it.each([
    ["an unknown placement", { scheduling: { placement: "magic" } }, /placement/],
    ["a TAO value the core refuses", { scheduling: { tao: { planner: { quantumTokens: 0 } } } }, /quantumTokens must be/],
    ["a readiness value the core refuses", { scheduling: { tao: { readiness: { minHistorySamples: 99 } } } }, /minHistorySamples/],
    ["an unknown TAO knob", { scheduling: { tao: { readiness: { readySoon: 5 } } } }, /readySoon/],
    ["a plan interval too short", { scheduling: { tao: { planIntervalMs: 1 } } }, /planIntervalMs/],
    ["a zero KV capacity", { engines: [{ id: "e1", url: "http://x", kvCapacityTokens: 0 }] }, /kvCapacityTokens/],
  ])("rejects %s with a clear message", (_what, extra, message) => {
    const input = { ...minimal, ...extra };
    expect(() => parsePoolConfig(input)).toThrow(PoolConfigError);
    expect(() => parsePoolConfig(input)).toThrow(message);
  });
});
