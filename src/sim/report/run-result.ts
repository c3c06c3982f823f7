import type { SimulationResult } from "../des/simulate.js";

/* The part of the discrete-event simulator's result that the report reads. */

export type { EngineRecord, ProgramRecord } from "../des/simulate.js";

export type RunResult = Pick<SimulationResult, "policy" | "engines" | "programs" | "simEndMs" | "wallMs" | "events" | "truncated">;
