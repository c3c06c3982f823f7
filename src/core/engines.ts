/*
 * Engine state as the pool sees it, and when an engine should get no more calls.
 * The pool keeps the real queue and sends each engine only a small buffer, so the
 * order it chooses is the order that runs; an engine is saturated when that buffer
 * is full or its own metrics show it is already backed up (the Gateway API Inference
 * Extension's rule: a waiting queue of 5, or 80 % KV cache use).
 */

export interface EngineState {
  id: string;
  healthy: boolean;
  /** Calls the pool has sent and not yet finished. */
  inFlight: number;
  /** Per-engine cap: the pool sends each engine only a small buffer. */
  maxInFlight: number;
  /**
   * The count cap for split calls' decodes (roles/decode-placement.ts): a decode engine
   * runs as many as its batch holds (vLLM's max_num_seqs). Undefined: maxInFlight.
   */
  maxDecodes?: number | undefined;
  /** The engine's own waiting queue from scraped metrics (0 if unknown). */
  waiting: number;
  /**
   * The waiting queue past which the engine is backed up; undefined: the pool's
   * maxEngineWaiting. A prefill engine's is unbounded (PoolCore sets it): prompts waiting
   * for its prefill budget are its normal state, and a program's long prompt is cheapest
   * where its prefix is cached, so the count cap and KV bound what it is sent.
   */
  maxWaiting?: number | undefined;
  /** 0..1 from scraped metrics (0 if unknown). */
  kvUsage: number;
}

export interface SaturationSettings {
  /** Saturated when the engine's own waiting queue is above this. */
  maxEngineWaiting: number;
  /** Saturated when KV cache use (0..1) is above this. */
  maxKvUsage: number;
}

export function validateSaturationSettings(settings: SaturationSettings): void {
  if (!(settings.maxEngineWaiting >= 0)) {
    throw new RangeError(`maxEngineWaiting must be >= 0, got ${settings.maxEngineWaiting}`);
  }
  if (!(settings.maxKvUsage >= 0)) {
    throw new RangeError(`maxKvUsage must be >= 0, got ${settings.maxKvUsage}`);
  }
}

/** The engine's own metrics say it is backed up (the part of saturation a scrape decides). */
export function metricsSaturated(reading: Pick<EngineState, "waiting" | "kvUsage" | "maxWaiting">, s: SaturationSettings): boolean {
  return backedUp(reading, s) || reading.kvUsage > s.maxKvUsage;
}

/** The engine's own waiting queue is past what the pool lets it hold. */
export function backedUp(reading: Pick<EngineState, "waiting" | "maxWaiting">, s: SaturationSettings): boolean {
  return reading.waiting > (reading.maxWaiting ?? s.maxEngineWaiting);
}

export function isSaturated(engine: EngineState, s: SaturationSettings): boolean {
  return engine.inFlight >= engine.maxInFlight || metricsSaturated(engine, s);
}

/** Healthy and not saturated: may be sent a call now. */
export function isAvailable(engine: EngineState, s: SaturationSettings): boolean {
  return engine.healthy && !isSaturated(engine, s);
}

/** What routing balances: calls the pool has outstanding plus the engine's own backlog. */
export function engineLoad(engine: EngineState): number {
  return engine.inFlight + engine.waiting;
}
