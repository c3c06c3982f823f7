import { describeClientAbort } from "./suites/client-abort.js";
import { describeTenancy } from "./suites/tenancy.js";
import { countEngineRequests, type EngineCounts, useLocalStack } from "./stack.js";

/*
 * The end-to-end suites that count generation requests at the engines, against one
 * stack of slow engines (one a pool) seen by one observer. The suites run one after
 * another, so each one's calls are over (the count back at 0) before the next begins.
 */

const atEngines: EngineCounts = { open: 0, peak: 0 };

const local = useLocalStack("observed", {
  engines: 1,
  // 64 tokens take ~25 ms of real time (calls overlap), 32,000 ~12 s (a client leaves long before the end).
  timeScale: 20,
  engineMaxInFlight: 4,
  engineObserver: countEngineRequests(atEngines),
});

// First, on the fresh stack it was tuned on (see its timings); it leaves no call open at the engine.
describeClientAbort(local, atEngines);
describeTenancy(local, atEngines);
