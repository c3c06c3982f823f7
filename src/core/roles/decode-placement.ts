import { HOLD_REASONS, type HoldReason } from "../admission.js";
import { backedUp, type EngineState, type SaturationSettings } from "../engines.js";

/*
 * Where a disaggregated call decodes (issue 13): among the decode engines that take
 * decodes, healthy and admitting it (below their decode cap, the engine's batch, and
 * with no backlog of their own: the scraped waiting queue within maxEngineWaiting), the
 * one with the most KV room left (its capacity less what the pool's account projects on
 * it), since a decode holds the whole context for as long as it generates; ties go to
 * the fewest calls, then the ID.
 *
 * A decode is not held for KV projected at its peak, as a new call is at admission: a
 * decode engine takes blocks as its sequences grow and starts a waiting request when its
 * prompt fits (vLLM's scheduler), so the sum of every decode's peak (prompt and expected
 * output, all at once, within kvTarget) leaves room the engine would have used. In the
 * simulator a 5:3 split at rate 0.6 ran 23.64 s mean end to end with that rule (kvTarget
 * 1, cap 128) against 8.64 s with this one; no holds at all, 8.94 s. When the engine is
 * really out of room its waiting queue grows, and the backlog rule holds the next decode.
 *
 * When none admits it the decode is held: sent anyway it would queue inside an engine
 * whose batch is full, where another engine may free first. The held call's prompt KV
 * stays pinned on its prefill engine meanwhile, until a decode engine reads it or vLLM's
 * VLLM_NIXL_ABORT_REQUEST_TIMEOUT (480 s, nixl_connector.py) frees it, so the hold is
 * bounded well below that (DECODE_HOLD_MAX_MS); past the bound the least loaded engine
 * gets it (pickDecodeEngine), before the KV is lost and the prompt must be computed
 * again. Pure.
 */

/** The longest a prefilled call's decode is held for a decode engine to admit it: a sixteenth of vLLM's 480 s KV hold. */
export const DECODE_HOLD_MAX_MS = 30_000;

export interface DecodeCandidate {
  engine: EngineState;
  /** KV capacity (tokens) and what the account projects on the engine now. */
  capacityTokens: number;
  projectedTokens: number;
}

export interface AdmittedDecodeCandidate extends DecodeCandidate {
  /** Why the engine may not take this decode now (the pool's admission rule); undefined when it may. */
  holdReason: HoldReason | undefined;
}

export type DecodeChoice = { kind: "place"; engine: EngineState } | { kind: "hold"; reason: HoldReason } | { kind: "none" };

/** The most decodes the engine runs: its batch when known, else the pool's count cap. */
export const decodeCapOf = (engine: EngineState): number => engine.maxDecodes ?? engine.maxInFlight;

const byRoom = (a: DecodeCandidate, b: DecodeCandidate): number => {
  const room = (c: DecodeCandidate) => c.capacityTokens - c.projectedTokens;
  return room(b) - room(a) || a.engine.inFlight - b.engine.inFlight || (a.engine.id < b.engine.id ? -1 : a.engine.id > b.engine.id ? 1 : 0);
};

/**
 * The decode engine for a call whose decode has been held `heldMs` so far: the best
 * that admits it; none admitting, a hold (with the most binding reason) until
 * `maxHoldMs`, then the least loaded; `none` when no candidate is healthy.
 */
export function chooseDecodeEngine(candidates: readonly AdmittedDecodeCandidate[], heldMs: number, maxHoldMs = DECODE_HOLD_MAX_MS): DecodeChoice {
  const healthy = candidates.filter((c) => c.engine.healthy);
  if (healthy.length === 0) return { kind: "none" };
  const admitting = healthy.filter((c) => c.holdReason === undefined).sort(byRoom)[0];
  if (admitting !== undefined) return { kind: "place", engine: admitting.engine };
  const fallback = heldMs >= maxHoldMs ? pickDecodeEngine(healthy) : undefined;
  if (fallback !== undefined) return { kind: "place", engine: fallback };
  const reasons = new Set(healthy.map((c) => c.holdReason));
  return { kind: "hold", reason: HOLD_REASONS.find((reason) => reasons.has(reason)) ?? "count" };
}

/**
 * Placement without a hold: below the decode cap if any is, else the least loaded (a
 * decode that cannot wait: SGLang's, placed before its prefill, and one held past the bound).
 */
export function pickDecodeEngine(candidates: readonly DecodeCandidate[]): EngineState | undefined {
  const healthy = candidates.filter((c) => c.engine.healthy);
  const belowCap = healthy.filter((c) => c.engine.inFlight < decodeCapOf(c.engine));
  const pool = belowCap.length > 0 ? belowCap : healthy;
  return [...pool].sort(byRoom)[0]?.engine;
}

/**
 * The decode engines' candidacy for a call's decode: each engine's KV room from
 * `account` (capacity less its projection, which counts every call placed there and not
 * yet ended, running or still waiting for blocks), and why it may not take a decode now.
 */
export function decodeCandidates(
  engines: readonly EngineState[],
  account: { projectedKvTokens(engineId: string): number },
  capacityTokens: (engineId: string) => number,
  saturation: SaturationSettings,
): AdmittedDecodeCandidate[] {
  return engines.map((engine) => ({
    engine,
    capacityTokens: capacityTokens(engine.id),
    projectedTokens: account.projectedKvTokens(engine.id),
    holdReason: decodeHoldReason(engine, saturation),
  }));
}

/** Why a decode engine may not take a decode now: unhealthy, at its decode cap, or backed up by its own metrics. */
export function decodeHoldReason(engine: EngineState, saturation: SaturationSettings): HoldReason | undefined {
  if (!engine.healthy) return "unhealthy";
  if (engine.inFlight >= decodeCapOf(engine)) return "count";
  return backedUp(engine, saturation) ? "engine-backlog" : undefined;
}
