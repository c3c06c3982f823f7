/*
 * What the TAO planner sees: the waiting programs and the engines' free KV capacity at
 * one instant. Built by the caller (pool or simulator) from its queue, the readiness
 * predictor and the cache-credit ledger; see buildSnapshot in snapshot-builder.ts.
 * Treat a snapshot as immutable once built: validation caches lookups per snapshot.
 */

export interface TaoProgram {
  programId: string;
  /** KV tokens its call needs (integer >= 1). */
  tokens: number;
  /** A call of the program is waiting now. false: it is in a tool phase and may only reserve. */
  queued: boolean;
  /** Readiness bit: its call is here, or its next call is expected within the horizon. */
  ready: boolean;
  /** Cache credit (tokens) per engine id; engines not listed hold none. */
  credit?: Readonly<Record<string, number>>;
}

export interface TaoEngine {
  engineId: string;
  /** KV tokens the planner may fill on this engine (0 for an unhealthy or saturated engine). */
  freeTokens: number;
}

export interface TaoSnapshot {
  /** Injected clock, ms. */
  at: number;
  /** In the caller's priority order: ties between equally good plans go to earlier programs. */
  programs: readonly TaoProgram[];
  engines: readonly TaoEngine[];
}

/** Token counts above this are rejected (a context of 16M tokens is a bug, and it keeps sums exact). */
export const MAX_PROGRAM_TOKENS = 2 ** 24;

export function validateSnapshot(snapshot: TaoSnapshot): void {
  if (typeof snapshot !== "object" || snapshot === null) throw new TypeError("a snapshot must be an object");
  if (!Number.isFinite(snapshot.at)) throw new RangeError(`snapshot.at must be finite, got ${snapshot.at}`);
  if (!Array.isArray(snapshot.programs) || !Array.isArray(snapshot.engines)) throw new TypeError("snapshot.programs and snapshot.engines must be arrays");
  const engineIds = new Set<string>();
  for (const engine of snapshot.engines) {
    if (typeof engine.engineId !== "string" || engine.engineId === "") throw new TypeError("engineId must be a non-empty string");
    if (engineIds.has(engine.engineId)) throw new RangeError(`duplicate engine ${engine.engineId}`);
    engineIds.add(engine.engineId);
    if (!Number.isFinite(engine.freeTokens) || engine.freeTokens < 0) {
      throw new RangeError(`engine ${engine.engineId}: freeTokens must be a finite number >= 0, got ${engine.freeTokens}`);
    }
  }
  if (snapshot.engines.length > 254) throw new RangeError(`at most 254 engines per plan, got ${snapshot.engines.length}`);
  const programIds = new Set<string>();
  for (const program of snapshot.programs) {
    if (typeof program.programId !== "string" || program.programId === "") throw new TypeError("programId must be a non-empty string");
    const id = program.programId;
    if (programIds.has(id)) throw new RangeError(`duplicate program ${id}`);
    programIds.add(id);
    if (!Number.isInteger(program.tokens) || program.tokens < 1 || program.tokens > MAX_PROGRAM_TOKENS) {
      throw new RangeError(`program ${id}: tokens must be an integer in [1, ${MAX_PROGRAM_TOKENS}], got ${program.tokens}`);
    }
    if (typeof program.queued !== "boolean" || typeof program.ready !== "boolean") {
      throw new TypeError(`program ${id}: queued and ready must be booleans`);
    }
    if (program.credit !== undefined) {
      if (typeof program.credit !== "object" || program.credit === null) throw new TypeError(`program ${id}: credit must be an object`);
      for (const [engineId, credit] of Object.entries(program.credit as Record<string, unknown>)) {
        if (typeof credit !== "number" || !Number.isFinite(credit) || credit < 0) throw new RangeError(`program ${id}: credit on ${engineId} must be a finite number >= 0, got ${String(credit)}`);
      }
    }
  }
}

/** Quanta a demand takes: rounded up, so a plan never overfills an engine. */
export function demandUnits(tokens: number, quantumTokens: number): number {
  return Math.ceil(tokens / quantumTokens);
}

/** Quanta an engine offers: rounded down, for the same reason. */
export function capacityUnits(freeTokens: number, quantumTokens: number): number {
  return Math.floor(freeTokens / quantumTokens);
}

/**
 * The credit that counts in the objective: whole tokens (so sums are exact and ties
 * are real ties), at most the call's own tokens (reuse cannot exceed what is needed).
 */
export function creditTokens(program: TaoProgram, engineId: string): number {
  const credit = program.credit?.[engineId];
  if (credit === undefined) return 0;
  return Math.min(program.tokens, Math.floor(credit));
}

/** Index of the engine holding the program's largest credit (lowest index on ties); -1 when none. */
export function cacheEngineIndex(program: TaoProgram, engines: readonly TaoEngine[]): number {
  let best = -1;
  let bestCredit = 0;
  engines.forEach((engine, index) => {
    const credit = creditTokens(program, engine.engineId);
    if (credit > bestCredit) {
      best = index;
      bestCredit = credit;
    }
  });
  return best;
}
