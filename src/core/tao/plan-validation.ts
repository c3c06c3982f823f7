/*
 * Re-validating a plan against live state before applying it: a plan is computed off
 * the hot path, and by the time it applies, programs may have left, calls may have
 * been taken, engines may have filled up. Each entry is checked on its own; an entry
 * that no longer holds is skipped (the next plan will see the new state), the others
 * still apply.
 *
 * An entry is stale, checked in this order, when:
 *   plan-expired  live.at is past plan.validUntil;
 *   program-gone  the program is not in the live snapshot;
 *   engine-gone   the engine is not in the live snapshot;
 *   call-gone     a dispatch entry, and the program has no queued call now;
 *   not-ready     a reserve entry, and the program has no call and is no longer ready
 *                 soon (a reserve whose call has arrived is valid: dispatch it there);
 *   program-grew  the program now needs more quanta than planned;
 *   capacity      the engine's live free tokens, less what earlier applied entries took,
 *                 no longer cover the program's tokens.
 */

import type { TaoPlan, TaoPlanEntry } from "./planner.js";
import { demandUnits, type TaoEngine, type TaoProgram, type TaoSnapshot } from "./snapshot.js";
import { snapshotSignature } from "./signature.js";

export type StaleReason = "plan-expired" | "program-gone" | "engine-gone" | "call-gone" | "not-ready" | "program-grew" | "capacity";

export type EntryValidity = { valid: true } | { valid: false; reason: StaleReason };

interface SnapshotIndex {
  programs: Map<string, TaoProgram>;
  engines: Map<string, TaoEngine>;
}

const indices = new WeakMap<TaoSnapshot, SnapshotIndex>();

function indexOf(snapshot: TaoSnapshot): SnapshotIndex {
  let index = indices.get(snapshot);
  if (index === undefined) {
    index = {
      programs: new Map(snapshot.programs.map((p) => [p.programId, p])),
      engines: new Map(snapshot.engines.map((e) => [e.engineId, e])),
    };
    indices.set(snapshot, index);
  }
  return index;
}

/**
 * Whether the entry still holds in `live`. `takenTokens` is what entries already
 * applied since `live` was read took per engine (omit when `live` already reflects them).
 */
export function validatePlanEntry(plan: TaoPlan, entry: TaoPlanEntry, live: TaoSnapshot, takenTokens: Readonly<Record<string, number>> = {}): EntryValidity {
  if (live.at > plan.validUntil) return { valid: false, reason: "plan-expired" };
  const index = indexOf(live);
  const program = index.programs.get(entry.programId);
  if (program === undefined) return { valid: false, reason: "program-gone" };
  const engine = index.engines.get(entry.engineId);
  if (engine === undefined) return { valid: false, reason: "engine-gone" };
  if (entry.kind === "dispatch" && !program.queued) return { valid: false, reason: "call-gone" };
  if (entry.kind === "reserve" && !program.queued && !program.ready) return { valid: false, reason: "not-ready" };
  if (demandUnits(program.tokens, plan.quantumTokens) > entry.units) return { valid: false, reason: "program-grew" };
  if (engine.freeTokens - (takenTokens[entry.engineId] ?? 0) < program.tokens) return { valid: false, reason: "capacity" };
  return { valid: true };
}

export interface PlanValidation {
  /** The live state has the plan's signature: nothing it depends on changed. */
  unchanged: boolean;
  /** Entries to apply, in plan order. */
  apply: TaoPlanEntry[];
  skipped: { entry: TaoPlanEntry; reason: StaleReason }[];
}

/** Every entry in plan order, as if each valid one were applied before the next is checked. */
export function validatePlan(plan: TaoPlan, live: TaoSnapshot): PlanValidation {
  const taken: Record<string, number> = {};
  const apply: TaoPlanEntry[] = [];
  const skipped: { entry: TaoPlanEntry; reason: StaleReason }[] = [];
  const index = indexOf(live);
  for (const entry of plan.entries) {
    const validity = validatePlanEntry(plan, entry, live, taken);
    if (!validity.valid) {
      skipped.push({ entry, reason: validity.reason });
      continue;
    }
    apply.push(entry);
    const tokens = index.programs.get(entry.programId)?.tokens ?? entry.tokens;
    taken[entry.engineId] = (taken[entry.engineId] ?? 0) + tokens;
  }
  return { unchanged: snapshotSignature(live, plan.quantumTokens) === plan.signature, apply, skipped };
}
