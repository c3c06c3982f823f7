/*
 * Applying TAO plan entries (already re-validated, plan-validation.ts) to the queue:
 * each entry's program has its queued calls handed out to the entry's engine, in plan
 * order (the snapshot's priority order) and, within a program, in queue order. The
 * planner counts KV tokens only, so an engine's slots and saturation still decide,
 * call by call, whether it takes one now (isAvailable); a call that cannot go stays
 * queued for the next plan.
 *
 * Reservations: a caller that holds a slot for a ready-soon program (a placeholder it
 * counts in the engine's inFlight) passes it in `held`. That program's first call to
 * its reserved engine takes the placeholder's slot, whatever the engine's saturation
 * (the capacity was set aside for it), as long as the engine is healthy; inFlight
 * does not grow, and the program is listed in `converted` so the caller drops the
 * placeholder without freeing the slot twice.
 *
 * Pure and deterministic; mutates the queue (taken calls) and the engines' inFlight.
 * O(n log n + d · E) for n queued calls and d dispatches.
 */

import type { Dispatch } from "../dispatch.js";
import { type EngineState, isAvailable, type SaturationSettings } from "../engines.js";
import type { Dequeued, ProgramQueue } from "../queue.js";
import type { TaoPlanEntry } from "./planner.js";

export interface PlanApplication {
  /** In the order they were taken. */
  dispatches: Dispatch[];
  /** Programs whose held reservation a dispatched call took over. */
  converted: string[];
  /** Entries with queued calls that the engine could not take (all or some): no free slot, or unhealthy. */
  blocked: TaoPlanEntry[];
  /** Reserve entries whose program has no queued call: the capacity to hold. */
  reserve: TaoPlanEntry[];
}

/** The queue's calls per program, in the order the queue would serve them. */
export function queuedByProgram(queue: ProgramQueue, now: number): Map<string, Dequeued[]> {
  const byProgram = new Map<string, Dequeued[]>();
  for (const dequeued of queue.peekOrder(now)) {
    const calls = byProgram.get(dequeued.call.programId);
    if (calls === undefined) byProgram.set(dequeued.call.programId, [dequeued]);
    else calls.push(dequeued);
  }
  return byProgram;
}

export function applyPlan(
  queue: ProgramQueue,
  engines: EngineState[],
  now: number,
  entries: readonly TaoPlanEntry[],
  saturation: SaturationSettings,
  held: ReadonlyMap<string, string> = new Map(),
): PlanApplication {
  const application: PlanApplication = { dispatches: [], converted: [], blocked: [], reserve: [] };
  if (entries.length === 0) return application;
  const byId = new Map(engines.map((engine) => [engine.id, engine]));
  const byProgram = queuedByProgram(queue, now);
  const applied = new Set<string>();
  for (const entry of entries) {
    // One program, one engine per plan; a duplicate entry (not from the planner) is ignored.
    if (applied.has(entry.programId)) continue;
    applied.add(entry.programId);
    const calls = byProgram.get(entry.programId) ?? [];
    if (calls.length === 0) {
      if (entry.kind === "reserve") application.reserve.push(entry);
      continue;
    }
    const engine = byId.get(entry.engineId);
    if (engine === undefined) continue;
    let reserved = held.get(entry.programId) === engine.id && engine.healthy;
    for (const queued of calls) {
      if (!reserved && !isAvailable(engine, saturation)) {
        application.blocked.push(entry);
        break;
      }
      const call = queue.remove(queued.call.callId);
      if (call === undefined) continue;
      if (reserved) {
        application.converted.push(entry.programId);
      } else {
        engine.inFlight += 1;
      }
      application.dispatches.push({ call, engineId: engine.id, level: queued.level, promoted: queued.promoted, reason: reserved ? "tao-reserved" : "tao-plan" });
      reserved = false;
    }
  }
  return application;
}
