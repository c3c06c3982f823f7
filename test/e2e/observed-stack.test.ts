import { describeTenancy } from "./suites/tenancy.js";
import { countEngineRequests, type EngineCounts, useLocalStack } from "./stack.js";

/*
 * The tenant-limit suite counts generation requests at the engine, against a stack of
 * slow engines (one a pool) seen by one observer. The client-abort suite needs the same
 * kind of stack but has its own (client-abort.test.ts): when the local runtime never
 * reports a client's hang-up, its calls run on until the edge's stall rule ends them,
 * and a suite sharing the stack would meet them at the engine.
 */

const atEngines: EngineCounts = { open: 0, peak: 0 };

const local = useLocalStack("observed", {
  engines: 1,
  // 64 tokens take ~25 ms of real time (calls overlap).
  timeScale: 20,
  engineMaxInFlight: 4,
  engineObserver: countEngineRequests(atEngines),
});

describeTenancy(local, atEngines);
