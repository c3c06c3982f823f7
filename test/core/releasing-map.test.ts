import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ReleasingMap } from "../../src/core/releasing-map.js";

type Op = { kind: "set"; key: string; value: number } | { kind: "delete"; key: string } | { kind: "get"; key: string };

const key = fc.constantFrom("a", "b", "c", "d", "e", "f");
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("set" as const), key, value: fc.integer() }),
  fc.record({ kind: fc.constant("delete" as const), key }),
  fc.record({ kind: fc.constant("get" as const), key }),
);

describe("ReleasingMap", () => {
  it("answers every operation as a Map does, in the same order", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const map = new Map<string, { n: number }>();
        const releasing = new ReleasingMap<string, { n: number }>();
        for (const o of ops) {
          if (o.kind === "set") {
            const value = { n: o.value };
            map.set(o.key, value);
            expect(releasing.set(o.key, value)).toBe(releasing);
          } else if (o.kind === "delete") {
            expect(releasing.delete(o.key)).toBe(map.delete(o.key));
          } else {
            expect(releasing.get(o.key)).toBe(map.get(o.key));
          }
          expect(releasing.has(o.key)).toBe(map.has(o.key));
          expect(releasing.size).toBe(map.size);
        }
        expect([...releasing.values()]).toEqual([...map.values()]);
        expect([...releasing]).toEqual([...map.entries()]);
        expect([...releasing.entries()]).toEqual([...map]);
      }),
    );
  });

  /*
   * The reason it exists, on this V8: a long-lived Map whose values come and go (two in
   * flight at a time, like calls) keeps them alive through young-generation collections,
   * so they are promoted; a ReleasingMap does not. Measured as the old generation's growth
   * over two minor collections after every value was deleted (~5 MB of values).
   */
  it("lets deleted values die in a young-generation collection, where a Map's replaced tables keep them", () => {
    v8.setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as (options?: { type: "minor" | "major" }) => void;
    const oldSpaceUsed = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === "old_space")?.space_used_size ?? 0;

    interface Registry {
      set(key: string, value: object): unknown;
      delete(key: string): boolean;
    }
    const promotedAfterChurn = (registry: Registry): number => {
      gc();
      gc(); // the registry and its table are now in the old generation
      const before = oldSpaceUsed();
      for (let i = 0; i < 64; i++) {
        registry.set(`call-${i}`, { i, state: new Array<number>(10_000).fill(i + 0.5) });
        if (i >= 2) registry.delete(`call-${i - 2}`);
      }
      registry.delete("call-62");
      registry.delete("call-63");
      gc({ type: "minor" });
      gc({ type: "minor" });
      return oldSpaceUsed() - before;
    };

    const valuesBytes = 64 * 10_000 * 8;
    const byMap = promotedAfterChurn(new Map<string, object>());
    const byReleasing = promotedAfterChurn(new ReleasingMap<string, object>());
    // The Map's deleted values were promoted (most of them); the ReleasingMap's were not.
    expect(byMap).toBeGreaterThan(valuesBytes / 2);
    expect(byReleasing).toBeLessThan(valuesBytes / 10);
  });
});
