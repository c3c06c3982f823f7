import { describe, expect, it } from "vitest";
import { DEFAULT_DISPATCH_SETTINGS } from "../../../src/core/settings.js";
import { EventQueue } from "../../../src/sim/des/event-queue.js";
import { ALL_POLICY_NAMES, isPolicyName, PLACEMENT_POLICY_NAMES, POLICIES, POLICY_NAMES, POOL_DEFAULT_MAX_IN_FLIGHT, policySetup } from "../../../src/sim/des/policies.js";

describe("policies", () => {
  it("describe every name", () => {
    expect(Object.keys(POLICIES).sort()).toEqual([...ALL_POLICY_NAMES].sort());
    expect(ALL_POLICY_NAMES).toEqual([...POLICY_NAMES, ...PLACEMENT_POLICY_NAMES]);
    for (const name of ALL_POLICY_NAMES) {
      expect(POLICIES[name].name).toBe(name);
      expect(isPolicyName(name)).toBe(true);
    }
    expect(isPolicyName("lifo")).toBe(false);
  });

  it("agentix is the pool's defaults with vLLM priority = level", () => {
    const setup = policySetup("agentix");
    expect(setup.dispatch).toEqual(DEFAULT_DISPATCH_SETTINGS);
    expect(setup.maxInFlight).toBe(POOL_DEFAULT_MAX_IN_FLIGHT);
    expect(POOL_DEFAULT_MAX_IN_FLIGHT).toBe(64);
    expect(setup.priorityScheduling).toBe(true);
    expect(setup.enginePriority?.(3, 10)).toBe(3);
  });

  it("direct policies have no pool queue to speak of", () => {
    for (const name of ["fcfs-rr", "fcfs-least-loaded"] as const) {
      const setup = policySetup(name, { maxInFlightPerEngine: 2 });
      expect(setup.maxInFlight).toBe(Infinity);
      expect(setup.dispatch.saturation).toEqual({ maxEngineWaiting: Infinity, maxKvUsage: Infinity });
      expect(setup.dispatch.queue.priorityValue).toBe("none");
      expect(setup.priorityScheduling).toBe(false);
      expect(setup.enginePriority).toBeUndefined();
      expect(POLICIES[name].poolQueue).toBe(false);
    }
    expect(policySetup("fcfs-rr").dispatch.routing.policy).toBe("round-robin");
    expect(policySetup("fcfs-least-loaded").dispatch.routing.policy).toBe("least-loaded");
  });

  it("queueing baselines differ from agentix only where named", () => {
    const values = { "request-mlq": "none", plas: "plas", atlas: "atlas" } as const;
    for (const [name, value] of Object.entries(values) as [keyof typeof values, string][]) {
      const setup = policySetup(name, { maxInFlightPerEngine: 6 });
      expect(setup.dispatch.queue.priorityValue).toBe(value);
      expect(setup.dispatch.queue.starvationRatio).toBe(Infinity);
      expect(setup.dispatch.routing.policy).toBe("least-loaded");
      expect(setup.dispatch.saturation).toEqual(DEFAULT_DISPATCH_SETTINGS.saturation);
      expect(setup.maxInFlight).toBe(6);
      expect(setup.priorityScheduling).toBe(false);
      expect(POLICIES[name].poolQueue).toBe(true);
    }
    expect(() => policySetup("plas", { maxInFlightPerEngine: 1.5 })).toThrow(/maxInFlightPerEngine/);
  });

  it("the oracle is agentix with true remaining work as the value and no anti-starvation", () => {
    const oracle = policySetup("oracle", { maxInFlightPerEngine: 6 });
    const agentix = policySetup("agentix", { maxInFlightPerEngine: 6 });
    expect(oracle.dispatch.queue.priorityValue).toBe("oracle");
    expect(oracle.dispatch.queue.starvationRatio).toBe(Infinity);
    expect(oracle.dispatch.routing).toEqual(agentix.dispatch.routing);
    expect(oracle.dispatch.saturation).toEqual(agentix.dispatch.saturation);
    expect(oracle.priorityScheduling).toBe(true);
    expect(oracle.maxInFlight).toBe(6);
  });
});

describe("EventQueue", () => {
  it("pops by time, then in scheduling order", () => {
    const queue = new EventQueue<string>();
    const input: [number, string][] = [[5, "a"], [1, "b"], [5, "c"], [0, "d"], [1, "e"], [5, "f"], [3, "g"]];
    for (const [time, name] of input) queue.push(time, name);
    const out: string[] = [];
    for (let e = queue.pop(); e !== undefined; e = queue.pop()) out.push(e.event);
    expect(out).toEqual(["d", "b", "e", "g", "a", "c", "f"]);
    expect(queue.size).toBe(0);
    expect(() => queue.push(Number.NaN, "x")).toThrow(RangeError);
  });

  it("matches a stable sort on many random events", () => {
    const queue = new EventQueue<number>();
    const times: number[] = [];
    let x = 12_345;
    for (let i = 0; i < 2_000; i++) {
      x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
      const time = x % 50;
      times.push(time);
      queue.push(time, i);
    }
    const expected = times.map((time, i) => ({ time, i })).sort((a, b) => a.time - b.time || a.i - b.i).map((e) => e.i);
    const out: number[] = [];
    for (let e = queue.pop(); e !== undefined; e = queue.pop()) out.push(e.event);
    expect(out).toEqual(expected);
  });
});
