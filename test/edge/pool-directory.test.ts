import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { POOL_STATUSES } from "../../src/edge/db/schema";
import { callableModels, type DirectoryPool, eligiblePools, type ModelAccess } from "../../src/edge/pools/directory";
import type { PoolOption } from "../../src/edge/pools/pool-choice";

/* Issue 11: the pool directory's pure part: eligible pools for a model, callable models for a plan. */

const pool = (id: string, over: Partial<DirectoryPool> = {}): DirectoryPool => ({
  id,
  region: "us-east",
  models: ["m"],
  status: "active",
  createdAt: 1_000,
  ...over,
});
const ANY: ModelAccess = { allowedModels: null, allowedRegions: null };
const ids = (pools: DirectoryPool[]) => pools.map((p) => p.id);

describe("eligiblePools", () => {
  const rows = [
    pool("a"),
    pool("b", { status: "draining" }),
    pool("c", { status: "disabled" }),
    pool("d", { region: "eu-west", models: ["m", "n"] }),
    pool("e", { models: ["n"] }),
  ];

  it("keeps active and draining pools serving the model, in the order given; never a disabled one", () => {
    expect(ids(eligiblePools(rows, ANY, "m"))).toEqual(["a", "b", "d"]);
    expect(ids(eligiblePools(rows, ANY, "n"))).toEqual(["d", "e"]);
    expect(eligiblePools(rows, ANY, "other")).toEqual([]);
    expect(eligiblePools([], ANY, "m")).toEqual([]);
  });

  it("keeps only the plan's regions, and nothing for a model the plan does not allow", () => {
    expect(ids(eligiblePools(rows, { allowedModels: null, allowedRegions: ["eu-west"] }, "m"))).toEqual(["d"]);
    expect(ids(eligiblePools(rows, { allowedModels: null, allowedRegions: ["ap-south"] }, "m"))).toEqual([]);
    expect(eligiblePools(rows, { allowedModels: ["n"], allowedRegions: null }, "m")).toEqual([]);
    expect(ids(eligiblePools(rows, { allowedModels: ["n"], allowedRegions: null }, "n"))).toEqual(["d", "e"]);
  });
});

describe("callableModels", () => {
  it("lists each model some eligible pool serves once, sorted, with the earliest such pool's creation time", () => {
    const rows = [
      pool("a", { models: ["z", "m"], createdAt: 30 }),
      pool("b", { models: ["m"], createdAt: 10, status: "draining" }),
      pool("c", { models: ["m", "gone"], createdAt: 5, status: "disabled" }),
      pool("d", { models: ["eu"], region: "eu-west", createdAt: 20 }),
    ];
    expect(callableModels(rows, ANY)).toEqual([
      { id: "eu", createdAt: 20 },
      { id: "m", createdAt: 10 },
      { id: "z", createdAt: 30 },
    ]);
    expect(callableModels(rows, { allowedModels: ["z", "eu", "gone", "nowhere"], allowedRegions: ["us-east"] })).toEqual([{ id: "z", createdAt: 30 }]);
    expect(callableModels(rows, { allowedModels: null, allowedRegions: ["eu-west"] })).toEqual([{ id: "eu", createdAt: 20 }]);
  });

  const MODELS = ["m0", "m1", "m2", "m3", "org/m4"];
  const REGIONS = ["us-east", "eu-west", "ap-south"];
  const arbPools = fc.uniqueArray(
    fc.record({
      id: fc.stringMatching(/^[a-z0-9]{1,6}$/),
      region: fc.constantFrom(...REGIONS),
      models: fc.uniqueArray(fc.constantFrom(...MODELS), { minLength: 1 }),
      status: fc.constantFrom(...POOL_STATUSES),
      createdAt: fc.nat(1e6),
    }),
    { selector: (p) => p.id, maxLength: 8 },
  );
  const arbAccess = fc.record({
    allowedModels: fc.option(fc.uniqueArray(fc.constantFrom(...MODELS, "unserved"), { minLength: 1 }), { nil: null }),
    allowedRegions: fc.option(fc.uniqueArray(fc.constantFrom(...REGIONS), { minLength: 1 }), { nil: null }),
  });

  it("agrees with eligiblePools: a model is callable exactly when some pool is eligible for it", () => {
    fc.assert(
      fc.property(arbPools, arbAccess, (rows, access) => {
        const callable = callableModels(rows, access);
        for (const model of [...MODELS, "unserved"]) {
          const eligible = eligiblePools(rows, access, model);
          const entry = callable.find((m) => m.id === model);
          expect(entry !== undefined).toBe(eligible.length > 0);
          if (entry) expect(entry.createdAt).toBe(Math.min(...eligible.map((p) => p.createdAt)));
          for (const p of eligible) {
            expect(p.status).not.toBe("disabled");
            expect(p.models).toContain(model);
            if (access.allowedRegions) expect(access.allowedRegions).toContain(p.region);
            if (access.allowedModels) expect(access.allowedModels).toContain(model);
          }
        }
        expect(callable.map((m) => m.id)).toEqual([...new Set(callable.map((m) => m.id))].sort());
      }),
    );
  });

  it("never gains a model from a tighter plan or a disabled pool; draining a pool changes nothing", () => {
    fc.assert(
      fc.property(arbPools, arbAccess, fc.nat(), (rows, access, pick) => {
        const all = new Set(callableModels(rows, ANY).map((m) => m.id));
        for (const m of callableModels(rows, access)) expect(all.has(m.id)).toBe(true);
        if (rows.length === 0) return;
        const target = pick % rows.length;
        const disabled = rows.map((p, i) => (i === target ? { ...p, status: "disabled" as const } : p));
        const after = new Set(callableModels(disabled, access).map((m) => m.id));
        for (const m of after) expect(callableModels(rows, access).some((c) => c.id === m)).toBe(true);
        // Draining keeps what the pool serves callable.
        const drained = rows.map((p, i) => (i === target && p.status === "active" ? { ...p, status: "draining" as const } : p));
        expect(callableModels(drained, access)).toEqual(callableModels(rows, access));
      }),
    );
  });
});

describe("eligiblePools and pool choice", () => {
  it("gives pool-choice.ts its options as they are (status narrowed to active | draining)", () => {
    const rows = [pool("a", { status: "draining" }), pool("b", { status: "disabled" }), pool("c")].map((p) => ({ ...p, weight: 1 }));
    const options: PoolOption[] = eligiblePools(rows, ANY, "m");
    expect(options.map((o) => [o.id, o.status])).toEqual([
      ["a", "draining"],
      ["c", "active"],
    ]);
  });
});
