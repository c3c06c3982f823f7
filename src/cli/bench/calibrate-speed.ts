/*
 * The simulator's own speed: one simulated hour of a 4-engine pool under the
 * built-in "mixed" workload at a load that keeps the engines busy but stable
 * (0.25 programs/s: engines ~90 % busy, the backlog flat).
 */

import type { PolicyName } from "../../sim/des/policies.js";
import { simulate } from "../../sim/des/simulate.js";
import { generatePrograms } from "../../sim/workload/generate.js";
import type { Workload } from "../../sim/workload/schema.js";

export interface SpeedRun {
  policy: PolicyName;
  programs: number;
  finished: number;
  events: number;
  simSeconds: number;
  wallSeconds: number;
  cpuSeconds: number;
  /** Mean engine busy fraction. */
  busy: number;
}

export const SPEED_RUN = { engines: 4, ratePerSec: 0.25, hours: 1, seed: 1 } as const;

export function measureSpeed(mixed: Workload, policy: PolicyName): SpeedRun {
  const durationSec = SPEED_RUN.hours * 3_600;
  const workload: Workload = { ...mixed, arrival: { process: "poisson", ratePerSec: SPEED_RUN.ratePerSec }, programs: { durationSec } };
  const programs = generatePrograms(workload, { seed: SPEED_RUN.seed });
  const cpu = process.cpuUsage();
  const result = simulate({ programs, policy, engines: SPEED_RUN.engines, maxSimMs: durationSec * 1_000 });
  const used = process.cpuUsage(cpu);
  return {
    policy,
    programs: programs.length,
    finished: result.programs.filter((p) => Number.isFinite(p.finishMs)).length,
    events: result.events,
    simSeconds: result.simEndMs / 1_000,
    wallSeconds: result.wallMs / 1_000,
    cpuSeconds: (used.user + used.system) / 1e6,
    busy: result.engines.reduce((sum, e) => sum + e.busyMs, 0) / (result.engines.length * result.simEndMs),
  };
}
