import { describe, expect, it } from "vitest";
import { callStartValue, completeCall, NO_SERVICE } from "../../src/core/service.js";

describe("program service accounting", () => {
  it("gives ATLAS 5 s and PLAS 6 s for 2 s of history then parallel calls of 3 s and 1 s", () => {
    const history = completeCall(NO_SERVICE, callStartValue(NO_SERVICE), 2_000);
    const hA = callStartValue(history);
    const hB = callStartValue(history);
    const afterB = completeCall(history, hB, 1_000);
    const afterA = completeCall(afterB, hA, 3_000);
    expect(afterA.criticalPathMs).toBe(5_000);
    expect(afterA.attainedServiceMs).toBe(6_000);
  });

  it("makes ATLAS equal PLAS for a sequential program", () => {
    let p = NO_SERVICE;
    for (const s of [120, 40, 900, 3]) p = completeCall(p, callStartValue(p), s);
    expect(p.criticalPathMs).toBe(1_063);
    expect(p.attainedServiceMs).toBe(1_063);
  });
});
