import { describe, expect, it } from "vitest";
import { DEFAULT_ROUTED_PREFIX_SETTINGS, RoutedPrefixIndex } from "../../src/core/prefix-index.js";

/* Chained block hashes: a prompt is its list; equal leading hashes are a shared prefix. */
const prompt = (prefix: string, blocks: number) => Array.from({ length: blocks }, (_, k) => hashOf(`${prefix}:${k}`));
function hashOf(text: string): number {
  let h = 2_166_136_261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16_777_619) >>> 0;
  return h;
}

describe("RoutedPrefixIndex", () => {
  it("matches the leading blocks an engine's tree holds, per engine", () => {
    const index = new RoutedPrefixIndex();
    const a = prompt("a", 6);
    index.insert("e1", a.slice(0, 4));
    expect(index.matchBlocks("e1", a)).toBe(4);
    expect(index.matchBlocks("e2", a)).toBe(0);
    expect(index.matchBlocks("e1", prompt("b", 6))).toBe(0);
    // A hole in the chain ends the match even if later blocks are known.
    index.insert("e1", [a[0] as number, 99, a[2] as number]);
    expect(index.matchBlocks("e1", [a[0] as number, 7, a[2] as number])).toBe(1);
    expect(index.blocks("e1")).toBe(5);
    expect(index.blocks("nobody")).toBe(0);
    index.forgetEngine("e1");
    expect(index.matchBlocks("e1", a)).toBe(0);
  });

  it("trims the least recently touched blocks past the cap, extensions before the prefixes they share", () => {
    const index = new RoutedPrefixIndex({ maxBlocksPerEngine: 8 });
    const shared = prompt("s", 4);
    const x = [...shared, ...prompt("x", 3)];
    const y = [...shared, ...prompt("y", 3)];
    index.insert("e1", x); // 7 blocks
    index.insert("e1", y); // 10 > 8: trim to 7 (7/8 of the cap), oldest first: x's own blocks
    expect(index.blocks("e1")).toBe(7);
    expect(index.matchBlocks("e1", y)).toBe(7);
    expect(index.matchBlocks("e1", x)).toBe(4);
    expect(DEFAULT_ROUTED_PREFIX_SETTINGS.maxBlocksPerEngine).toBe(2 ** 20);
  });

  it("rejects a bad cap", () => {
    expect(() => new RoutedPrefixIndex({ maxBlocksPerEngine: 0 })).toThrow(/maxBlocksPerEngine/);
    expect(() => new RoutedPrefixIndex({ maxBlocksPerEngine: 1.5 })).toThrow(/maxBlocksPerEngine/);
  });
});
