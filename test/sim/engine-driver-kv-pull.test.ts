import { describe, expect, it } from "vitest";
import { RealTimeEngineDriver } from "../../src/sim/engine-driver.js";
import { EngineModel, type FinishedEvent, type KvPull } from "../../src/sim/engine-model.js";
import { tokens } from "./model-helpers.js";

/* The wall-clock driver with remote-KV requests: it sleeps until a pull ends (the model's next wake), and hands a reported pull to its observer. */

function run(driver: RealTimeEngineDriver, id: string, report?: (pull: KvPull) => void): Promise<FinishedEvent> {
  return new Promise((resolve, reject) => {
    driver.submit(
      { id, promptTokens: tokens(200), maxTokens: 3, ignoreEos: true, remoteKv: { reported: report !== undefined } },
      { onToken: () => {}, onFinished: resolve, onClosed: () => reject(new Error("closed")), ...(report === undefined ? {} : { onKvPull: report }) },
    );
  });
}

describe("RealTimeEngineDriver and KV pulls", () => {
  it("wakes at the pull's end with nothing else to run, by the scaled clock", async () => {
    // A 2 s pull at 100× is 20 ms of real time.
    const driver = new RealTimeEngineDriver(new EngineModel({ kvPullMs: () => 2_000 }), { timeScale: 100 });
    const started = performance.now();
    const done = await run(driver, "d");
    expect(performance.now() - started).toBeGreaterThanOrEqual(18);
    // (start + 2000) − start in floating point can come out a few ulps short of 2000.
    expect(done.remoteKv?.kvWaitMs).toBeGreaterThanOrEqual(2_000 - 1e-6);
    expect(done.prefillTokens).toBe(1);
    driver.close();
  });

  it("does not wait in real time with an infinite time scale", async () => {
    const driver = new RealTimeEngineDriver(new EngineModel({ kvPullMs: () => 60_000 }), { timeScale: Number.POSITIVE_INFINITY });
    const started = performance.now();
    const done = await run(driver, "d");
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(done.remoteKv?.kvWaitMs).toBeGreaterThanOrEqual(60_000 - 1e-6);
    driver.close();
  });

  it("hands a reported pull to the observer and decodes once kvPullDone says what arrived", async () => {
    const driver = new RealTimeEngineDriver(new EngineModel({ kvPullMs: () => 10 }), { timeScale: 10 });
    const pulls: KvPull[] = [];
    const done = await run(driver, "d", (pull) => {
      pulls.push(pull);
      setTimeout(() => driver.kvPullDone(pull.requestId, 192), 5);
    });
    expect(pulls).toEqual([expect.objectContaining({ requestId: "d", tokens: 200 })]);
    expect(done.usage.cachedTokens).toBe(192);
    expect(done.prefillTokens).toBe(8);
    driver.close();
  });
});
