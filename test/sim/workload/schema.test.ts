import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseWorkload, WorkloadError } from "../../../src/sim/workload/index.js";
import { BUILTIN_WORKLOADS, builtinWorkloadPath, loadWorkload, loadWorkloadFile } from "../../../src/sim/workload/load.js";

const minimal = {
  name: "t",
  arrival: { process: "poisson", ratePerSec: 1 },
  programs: { count: 10 },
  mix: [{ kind: "chat", weight: 1 }],
};

function issuesOf(json: unknown): string[] {
  try {
    parseWorkload(json, "test.json");
  } catch (error) {
    expect(error).toBeInstanceOf(WorkloadError);
    const workloadError = error as WorkloadError;
    for (const issue of workloadError.issues) expect(workloadError.message).toContain(`${issue.path}: ${issue.message}`);
    expect(workloadError.message).toContain("test.json");
    return workloadError.issues.map((issue) => issue.path);
  }
  throw new Error("expected a WorkloadError");
}

describe("workload schema", () => {
  it("fills every knob's default and accepts shorthands", () => {
    const w = parseWorkload({ ...minimal, programs: 5, mix: [{ kind: "coding-agent", params: { gapSec: 2 } }] });
    expect(w.programs).toEqual({ count: 5 });
    const entry = w.mix[0];
    expect(entry?.kind).toBe("coding-agent");
    if (entry?.kind !== "coding-agent") return;
    expect(entry.weight).toBe(1);
    expect(entry.params.gapSec).toEqual({ dist: "constant", value: 2 });
    expect(entry.params.contextCapTokens).toBe(70_000);
    expect(entry.params.fanOutMode).toBe("tools");
    expect(entry.params.callsPerProgram.dist).toBe("lognormal");
  });

  it.each([
    ["a lognormal with a negative median", { mix: [{ kind: "chat" }, { kind: "function-calling", params: { callsPerProgram: { dist: "lognormal", median: -3, mean: 10 } } }] }, ["mix.1.params.callsPerProgram.median"]],
    ["a lognormal whose mean is below its median", { mix: [{ kind: "tree-search", params: { outputTokens: { dist: "lognormal", median: 80, mean: 70 } } }] }, ["mix.0.params.outputTokens.mean"]],
    ["a lognormal with mixed parameterisations", { mix: [{ kind: "chat", params: { outputTokens: { dist: "lognormal", median: 80, mu: 4 } } }] }, ["mix.0.params.outputTokens"]],
    ["an unknown kind", { mix: [{ kind: "robot" }] }, ["mix.0.kind"]],
    ["a misspelt knob", { mix: [{ kind: "chat", params: { callsPerProgam: 3 } }] }, ["mix.0.params"]],
    ["a knob of another kind", { mix: [{ kind: "chat", params: { fanOut: 2 } }] }, ["mix.0.params"]],
    ["an unknown distribution", { mix: [{ kind: "chat", params: { gapSec: { dist: "pareto", alpha: 1 } } }] }, ["mix.0.params.gapSec.dist"]],
    ["weights that do not match the values", { mix: [{ kind: "coding-agent", params: { fanOut: { dist: "discrete", values: [1, 2], weights: [1] } } }] }, ["mix.0.params.fanOut.weights"]],
    ["a token count that can be zero", { mix: [{ kind: "chat", params: { outputTokens: { dist: "uniform", min: 0, max: 5 } } }] }, ["mix.0.params.outputTokens.min"]],
    ["a normal without a floor", { mix: [{ kind: "coding-agent", params: { firstPromptTokens: { dist: "normal", mean: 5000, sd: 1000 } } }] }, ["mix.0.params.firstPromptTokens.min"]],
    ["bounds the wrong way round", { mix: [{ kind: "chat", params: { gapSec: { dist: "exponential", mean: 1, min: 5, max: 2 } } }] }, ["mix.0.params.gapSec.max"]],
    ["a negative rate", { arrival: { process: "poisson", ratePerSec: -1 } }, ["arrival.ratePerSec"]],
    ["a missing arrival", { arrival: undefined }, ["arrival"]],
    ["a duration with batch arrivals", { arrival: { process: "batch" }, programs: { durationSec: 60 } }, ["programs.durationSec"]],
    ["both count and duration", { programs: { count: 3, durationSec: 60 } }, ["programs"]],
    ["a fractional count", { programs: 2.5 }, ["programs.count"]],
    ["no weight anywhere", { mix: [{ kind: "chat", weight: 0 }] }, ["mix"]],
    ["an empty mix", { mix: [] }, ["mix"]],
    ["a bad tenant id", { tenants: [{ id: "has space" }] }, ["tenants.0.id"]],
    ["a plan weight of 0", { tenants: [{ id: "ten_a", planWeight: 0 }] }, ["tenants.0.planWeight"]],
    ["a mirror of an unknown tenant", { tenants: [{ id: "ten_a" }, { id: "ten_b", weight: 0, mirrors: "ten_x" }] }, ["tenants.1.mirrors"]],
    ["a mirror that also draws programs", { tenants: [{ id: "ten_a" }, { id: "ten_b", mirrors: "ten_a" }] }, ["tenants.1.weight"]],
    ["several problems at once", { name: "", arrival: { process: "poisson", ratePerSec: 0 } }, ["name", "arrival.ratePerSec"]],
  ])("rejects %s, naming the field", (_what, patch, paths) => {
    expect(issuesOf({ ...minimal, ...patch })).toEqual(paths);
  });
});

describe("tenants", () => {
  it("a traffic weight and, separately, an optional plan weight", () => {
    const w = parseWorkload({ ...minimal, tenants: [{ id: "ten_a", weight: 3, planWeight: 2 }, { id: "ten_b" }] });
    expect(w.tenants).toEqual([
      { id: "ten_a", weight: 3, planWeight: 2, churnsPrograms: false },
      { id: "ten_b", weight: 1, churnsPrograms: false },
    ]);
  });
});

describe("built-in workloads", () => {
  it.each(BUILTIN_WORKLOADS)("%s parses and survives a round trip", async (name) => {
    const json: unknown = JSON.parse(await readFile(builtinWorkloadPath(name), "utf8"));
    const parsed = parseWorkload(json);
    expect(parsed.name).toBe(name);
    const again = parseWorkload(JSON.parse(JSON.stringify(parsed)));
    expect(again).toEqual(parsed);
    expect(await loadWorkload(name)).toEqual(parsed);
  });
});

describe("workload files", () => {
  let dir = "";
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "agentix-workload-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("loads a file by path", async () => {
    const file = path.join(dir, "mine.json");
    await writeFile(file, JSON.stringify(minimal));
    expect((await loadWorkload(file)).name).toBe("t");
  });

  it("names the file when it is not JSON", async () => {
    const file = path.join(dir, "broken.json");
    await writeFile(file, "{ name: ");
    await expect(loadWorkloadFile(file)).rejects.toThrow(/broken\.json[\s\S]*not valid JSON/);
  });

  it("names the file when it is missing", async () => {
    await expect(loadWorkloadFile(path.join(dir, "absent.json"))).rejects.toThrow(WorkloadError);
  });

  it("names the field when the content is wrong", async () => {
    const file = path.join(dir, "wrong.json");
    await writeFile(file, JSON.stringify({ ...minimal, mix: [{ kind: "chat", params: { callsPerProgram: { dist: "lognormal", median: 0, sigma: 1 } } }] }));
    await expect(loadWorkloadFile(file)).rejects.toThrow(/wrong\.json[\s\S]*mix\.0\.params\.callsPerProgram\.median: must be > 0/);
  });
});
