import { describe, expect, it } from "vitest";
import { levelBounds, levelOf, type LevelSettings } from "../../src/core/levels.js";

const K4: LevelSettings = { levels: 4, firstBoundMs: 1_000, growth: 2 };

describe("levelBounds", () => {
  it("grows geometrically and leaves the last level unbounded", () => {
    expect(levelBounds(K4)).toEqual([1_000, 2_000, 4_000]);
    expect(levelBounds({ levels: 3, firstBoundMs: 10, growth: 1.5 })).toEqual([10, 15]);
  });

  it("has no bounds for a single level", () => {
    expect(levelBounds({ levels: 1, firstBoundMs: 1_000, growth: 2 })).toEqual([]);
  });
});

describe("levelOf", () => {
  it.each([
    [0, 0],
    [999.999, 0],
    [1_000, 1],
    [1_999, 1],
    [2_000, 2],
    [3_999.5, 2],
    [4_000, 3],
    [4_001, 3],
    [1e12, 3],
    [Number.POSITIVE_INFINITY, 3],
  ])("puts %d ms at level %d", (value, level) => {
    expect(levelOf(value, K4)).toBe(level);
  });

  it("agrees with levelBounds at every bound, even when the growth is not a power of two", () => {
    const settings: LevelSettings = { levels: 9, firstBoundMs: 700, growth: 1.7 };
    levelBounds(settings).forEach((bound, i) => {
      expect(levelOf(bound, settings)).toBe(i + 1);
      expect(levelOf(bound - 1e-6, settings)).toBe(i);
    });
  });

  it("maps everything to level 0 when K = 1", () => {
    const one: LevelSettings = { levels: 1, firstBoundMs: 1_000, growth: 2 };
    expect(levelOf(0, one)).toBe(0);
    expect(levelOf(1_000, one)).toBe(0);
    expect(levelOf(1e15, one)).toBe(0);
  });

  it("rejects invalid settings and values", () => {
    expect(() => levelOf(1, { levels: 0, firstBoundMs: 1, growth: 2 })).toThrow(/levels/);
    expect(() => levelOf(1, { levels: 2.5, firstBoundMs: 1, growth: 2 })).toThrow(/levels/);
    expect(() => levelOf(1, { levels: 2, firstBoundMs: 0, growth: 2 })).toThrow(/firstBoundMs/);
    expect(() => levelOf(1, { levels: 2, firstBoundMs: 1, growth: 1 })).toThrow(/growth/);
    expect(() => levelBounds({ levels: 2, firstBoundMs: 1, growth: Number.NaN })).toThrow(/growth/);
    expect(() => levelOf(Number.NaN, K4)).toThrow(RangeError);
    expect(() => levelOf(-1, K4)).toThrow(RangeError);
  });
});
