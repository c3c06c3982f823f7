import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type CallTokens, standaloneCallMs } from "../../src/core/admission.js";
import { PoolCore } from "../../src/core/pool-core.js";
import { DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import { decodeCostOf, ENGINE_PROFILES, type EngineProfile } from "../../src/sim/profiles.js";
import { StepShape, stepDurationMs } from "../../src/sim/timing.js";

/** The simulator's own account of one call alone: a prefill step, then one decode step per further token. */
function simulatorAlone(profile: EngineProfile, t: CallTokens): number {
  const shape = new StepShape();
  const fresh = t.promptTokens - t.cachedTokens;
  shape.addPrefill(t.cachedTokens, fresh);
  let total = stepDurationMs(profile, shape);
  for (let i = 1; i < t.completionTokens; i++) {
    shape.reset();
    shape.addDecode(t.promptTokens + i);
    total += stepDurationMs(profile, shape);
  }
  return total;
}

describe("standaloneCallMs", () => {
  it("is the simulator's step formula for the call run alone, on every profile", () => {
    const tokens = fc
      .record({ prompt: fc.integer({ min: 1, max: 60_000 }), cachedShare: fc.double({ min: 0, max: 1, noNaN: true }), completion: fc.integer({ min: 1, max: 300 }) })
      .map(({ prompt, cachedShare, completion }) => ({ promptTokens: prompt, cachedTokens: Math.floor(prompt * cachedShare), completionTokens: completion }));
    fc.assert(
      fc.property(fc.constantFrom(...Object.values(ENGINE_PROFILES)), tokens, (profile, t) => {
        const alone = simulatorAlone(profile, t);
        expect(Math.abs(standaloneCallMs(decodeCostOf(profile), t) - alone)).toBeLessThan(1e-6 * alone + 1e-9);
      }),
      { numRuns: 200 },
    );
  });

  it('is what the pool core charges under service "work", and the wall time under "wall" or without a cost model or usage', () => {
    const model = decodeCostOf(ENGINE_PROFILES["llama-3.1-8b-h100"]);
    const engines = [
      { id: "modelled", maxInFlight: 8, costModel: model },
      { id: "plain", maxInFlight: 8 },
    ];
    const tokens = { promptTokens: 4_000, cachedTokens: 3_000, completionTokens: 100 };
    const work = new PoolCore({ settings: DEFAULT_DISPATCH_SETTINGS, engines });
    expect(work.serviceMs("modelled", 5_000, tokens)).toBe(standaloneCallMs(model, tokens));
    expect(work.serviceMs("modelled", 5_000)).toBe(5_000);
    expect(work.serviceMs("plain", 5_000, tokens)).toBe(5_000);
    const wall = new PoolCore({ settings: { ...DEFAULT_DISPATCH_SETTINGS, service: "wall" }, engines });
    expect(wall.serviceMs("modelled", 5_000, tokens)).toBe(5_000);
    expect(() => new PoolCore({ settings: { ...DEFAULT_DISPATCH_SETTINGS, service: "cpu" as "wall" }, engines })).toThrow(/service must be one of work, wall/);
  });
});
