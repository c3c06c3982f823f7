/*
 * Cache credit: how many of a program's prefix tokens an engine is likely still to
 * hold. When a call of the program runs on an engine, the engine ends up holding the
 * program's context (prompt + completion): that many reusable tokens, observed at
 * that instant. Engines evict cached prefixes under load, modelled as exponential
 * decay with a half-life:
 *   credit(now) = retention(engine) · tokens · 2^(-(now - observedAt) / halfLife)
 *
 * Refinement by the engine's own report: each call's `cached_tokens` says how much of
 * its prompt the engine really reused. Compared with the credit predicted for that
 * engine just before the call, it calibrates the engine's retention (an EWMA of
 * reported / predicted, clamped to [0, 1], starting at 1): an engine without prefix
 * caching, which always reports 0, drifts to no credit at all.
 */

import { type CacheCreditSettings, validateCacheCreditSettings } from "./settings.js";
import { decayed } from "../tenant-shares.js";

export interface CacheObservation {
  programId: string;
  engineId: string;
  at: number;
  /** The program's context after the call (prompt + completion tokens): what the engine now holds. */
  contextTokens: number;
  /** The engine's usage.prompt_tokens_details.cached_tokens for this call, when reported. */
  cachedTokens?: number;
}

interface Held {
  tokens: number;
  observedAt: number;
}

function nonNegative(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a finite number >= 0, got ${String(value)}`);
  }
  return value;
}

function nonEmpty(name: string, value: unknown): string {
  if (typeof value !== "string" || value === "") throw new TypeError(`${name} must be a non-empty string`);
  return value;
}

export class CacheCreditLedger {
  /** programId -> engineId -> what was observed. */
  readonly #held = new Map<string, Map<string, Held>>();
  readonly #retention = new Map<string, number>();

  constructor(private readonly settings: CacheCreditSettings) {
    validateCacheCreditSettings(settings);
  }

  /** A call of the program ran on the engine. */
  observe(observation: CacheObservation): void {
    const programId = nonEmpty("programId", observation.programId);
    const engineId = nonEmpty("engineId", observation.engineId);
    const contextTokens = nonNegative("contextTokens", observation.contextTokens);
    const at = observation.at;
    if (typeof at !== "number" || !Number.isFinite(at)) throw new RangeError(`at must be a finite number, got ${String(at)}`);
    const cachedTokens = observation.cachedTokens === undefined ? undefined : nonNegative("cachedTokens", observation.cachedTokens);

    let engines = this.#held.get(programId);
    if (engines === undefined) {
      engines = new Map();
      this.#held.set(programId, engines);
    }
    const before = engines.get(engineId);
    if (cachedTokens !== undefined && before !== undefined) {
      const predicted = decayed(before.tokens, at - before.observedAt, this.settings.halfLifeMs);
      if (predicted >= this.settings.minCalibrationTokens && predicted > 0) {
        const ratio = Math.min(1, cachedTokens / predicted);
        const old = this.retention(engineId);
        this.#retention.set(engineId, old + this.settings.retentionAlpha * (ratio - old));
      }
    }
    // An older observation arriving late does not replace a newer one.
    if (before === undefined || at >= before.observedAt) engines.set(engineId, { tokens: contextTokens, observedAt: at });
  }

  /** Credit (tokens, fractional) of the program on the engine at `now`; 0 when never observed. */
  credit(programId: string, engineId: string, now: number): number {
    const held = this.#held.get(programId)?.get(engineId);
    if (held === undefined) return 0;
    return this.retention(engineId) * decayed(held.tokens, now - held.observedAt, this.settings.halfLifeMs);
  }

  /** Credit on every engine where the program was observed. */
  credits(programId: string, now: number): Record<string, number> {
    const out: Record<string, number> = {};
    const engines = this.#held.get(programId);
    if (engines === undefined) return out;
    for (const engineId of engines.keys()) out[engineId] = this.credit(programId, engineId, now);
    return out;
  }

  /** The engine's calibrated retention (1 until reports say otherwise). */
  retention(engineId: string): number {
    return this.#retention.get(engineId) ?? 1;
  }

  forgetProgram(programId: string): void {
    this.#held.delete(programId);
  }

  /** The engine lost its cache (restart, replacement): no credit left there. */
  forgetEngine(engineId: string): void {
    for (const [programId, engines] of this.#held) {
      engines.delete(engineId);
      if (engines.size === 0) this.#held.delete(programId);
    }
    this.#retention.delete(engineId);
  }

  /** Drops credits that decayed below `belowTokens`; returns how many (program, engine) pairs. */
  prune(now: number, belowTokens: number): number {
    let dropped = 0;
    for (const [programId, engines] of this.#held) {
      for (const [engineId, held] of engines) {
        if (decayed(held.tokens, now - held.observedAt, this.settings.halfLifeMs) < belowTokens) {
          engines.delete(engineId);
          dropped += 1;
        }
      }
      if (engines.size === 0) this.#held.delete(programId);
    }
    return dropped;
  }

  get programCount(): number {
    return this.#held.size;
  }
}
