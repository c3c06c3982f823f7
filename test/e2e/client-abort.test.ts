import { describeClientAbort } from "./suites/client-abort.js";
import { countEngineRequests, type EngineCounts, useLocalStack } from "./stack.js";

/*
 * A client that leaves mid-stream, on a stack of its own (the suite's timings were tuned
 * on a fresh one, and a hang-up the local runtime never reports leaves a call running
 * until the edge's stall rule ends it, which no other suite should meet at the engine).
 */

const atEngines: EngineCounts = { open: 0, peak: 0 };

const local = useLocalStack("abort", {
  engines: 1,
  // 32,000 tokens take ~12 s of real time (~23 s once nobody reads them): a client leaves long before the end.
  timeScale: 20,
  engineMaxInFlight: 4,
  engineObserver: countEngineRequests(atEngines),
});

describeClientAbort(local, atEngines);
