import { describe, expect, it } from "vitest";
import { DurationHistory } from "../../../src/core/tao/duration-history.js";

/*
 * The history keeps each window of recent durations in order as values come and go
 * (duration-history.ts), instead of sorting a copy at every read: its medians must be
 * the medians of the latest values, whatever their order, repeats and evictions.
 */

function naiveMedian(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** A deterministic stream of durations with many repeats (small range) and some spread. */
function* durations(seed: number, count: number): Generator<number> {
  let state = seed;
  for (let i = 0; i < count; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    yield state % 7 === 0 ? state % 100_000 : state % 9;
  }
}

describe("duration history medians", () => {
  it.each([1, 2, 5, 8])("are the medians of the latest values (window of %i), through evictions and repeats", (size) => {
    const history = new DurationHistory({ toolHistorySize: size, globalHistorySize: size + 1, maxTools: 4 });
    const byTool = new Map<string, number[]>();
    const global: number[] = [];
    let n = 0;
    for (const value of durations(size * 7919, 400)) {
      const tool = ["bash", "grep", "web"][n++ % 3] as string;
      history.record(tool, value);
      const recent = byTool.get(tool) ?? [];
      recent.push(value);
      byTool.set(tool, recent.slice(-size));
      global.push(value);
      expect(history.toolEstimate(tool, 1)).toBe(naiveMedian(byTool.get(tool) ?? []));
      expect(history.globalEstimate(1)).toBe(naiveMedian(global.slice(-(size + 1))));
    }
  });

  it("ignores what is not a duration and waits for enough samples", () => {
    const history = new DurationHistory({ toolHistorySize: 3, globalHistorySize: 3, maxTools: 4 });
    history.record("bash", Number.NaN);
    history.record("bash", -1);
    expect(history.samples("bash")).toBe(0);
    history.record("bash", 10);
    expect(history.toolEstimate("bash", 2)).toBeUndefined();
    history.record("bash", 30);
    expect(history.toolEstimate("bash", 2)).toBe(20);
  });
});
