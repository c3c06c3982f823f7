import { parentPort, workerData } from "node:worker_threads";
import { simulate } from "../../sim/des/simulate.js";
import { makeRunPlan, runSteadyState } from "./scheduling-run.js";
import type { RunJob, WorkerInit, WorkerReply } from "./scheduling-workers.js";

/* A worker thread of `agentix bench --jobs N`: holds the programs once, runs (policy, rate) jobs. */

const init = workerData as WorkerInit;
const plan = makeRunPlan(init.programs, init.settings, init.windowSpec);
const port = parentPort;
if (port === null) throw new Error("scheduling-worker.ts must run in a worker thread");

port.on("message", (message: RunJob & { id: number }) => {
  let reply: WorkerReply;
  try {
    reply = { id: message.id, output: runSteadyState(plan, simulate, message.policy, message.rate, message.drainCapMs) };
  } catch (error) {
    reply = { id: message.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
  }
  port.postMessage(reply);
});
