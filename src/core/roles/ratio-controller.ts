import {
  engineToMove,
  type RoleCapacity,
  type RoleController,
  type RoleDecision,
  type RoleDemand,
  type RoleEngineState,
  type SplitRole,
  splitOf,
} from "./roles.js";

/*
 * The Agentix role controller: the prefill:decode split that serves the measured
 * demand. Each side's pressure is its demand over one engine's capacity in that role
 * (prefill tokens/s over the prefill rate; output tokens/s over the decode rate at a
 * full batch), raised by how far that side misses its latency target (P95 TTFT for
 * prefill, ITL for decode) when it does. The busier side per engine,
 * `pressure / engines`, is what a switch must relieve: an engine moves from the other
 * side only when that lowers the busier side's load per engine by more than the
 * hysteresis margin after the move, which a balanced split's noise cannot do. Demand is
 * smoothed over rounds (EWMA) and a move must also be asked for by each of the last
 * `sustainRounds` rounds' own demand; one switch runs at a time, none starts within the
 * cooldown of the last, and nothing moves while the busier side runs below half its
 * engines' rate, so a transient burst does not move an engine and the split does not
 * flap. Pure: the caller passes the time.
 */

export interface RatioControllerSettings {
  /** Weight of the newest round in the smoothed demand (0–1]. */
  smoothing: number;
  /** A switch must cut the busier side's load per engine by more than this fraction. */
  hysteresis: number;
  /** Rounds in a row whose own demand must ask for the same move (a burst shorter than this moves nothing). */
  sustainRounds: number;
  /** Below this load per engine on the busier side (1 = its engines' full rate) nothing moves: the split has room either way. */
  minLoadToAct: number;
  /** No switch starts within this long of the last one's start (ms). */
  cooldownMs: number;
  /** Engines each side keeps. */
  minPrefillEngines: number;
  minDecodeEngines: number;
  /** Latency targets; a side that misses its target counts its pressure × the miss. */
  ttftTargetMs: number;
  itlTargetMs: number;
}

export const DEFAULT_RATIO_CONTROLLER: RatioControllerSettings = Object.freeze({
  smoothing: 0.3,
  hysteresis: 0.15,
  sustainRounds: 3,
  minLoadToAct: 0.5,
  cooldownMs: 30_000,
  minPrefillEngines: 1,
  minDecodeEngines: 1,
  ttftTargetMs: 2_000,
  itlTargetMs: 50,
});

/** A side's pressure in engines' worth of work: demand over one engine's rate, × its target miss. */
export function sidePressure(demandPerSec: number, ratePerEngine: number, latencyMs: number | undefined, targetMs: number): number {
  const miss = latencyMs === undefined || targetMs <= 0 ? 1 : Math.max(1, latencyMs / targetMs);
  return (Math.max(0, demandPerSec) / Math.max(1e-9, ratePerEngine)) * miss;
}

interface Pressure {
  prefill: number;
  decode: number;
}

/** The busier side's pressure per engine with `prefill` and `decode` engines. */
const worstLoad = (pressure: Pressure, prefill: number, decode: number): number =>
  Math.max(pressure.prefill / Math.max(prefill, 1e-9), pressure.decode / Math.max(decode, 1e-9));

interface Proposal {
  to: SplitRole;
  /** The busier side's load per engine now, and after the move. */
  current: number;
  after: number;
}

/** The move that relieves the busier side by more than the hysteresis margin, within each side's minimum; undefined when none does. */
function proposal(pressure: Pressure, prefill: number, decode: number, s: RatioControllerSettings): Proposal | undefined {
  const current = worstLoad(pressure, prefill, decode);
  if (current < s.minLoadToAct) return undefined;
  const moves: Proposal[] = [];
  if (decode > s.minDecodeEngines) moves.push({ to: "prefill", current, after: worstLoad(pressure, prefill + 1, decode - 1) });
  if (prefill > s.minPrefillEngines) moves.push({ to: "decode", current, after: worstLoad(pressure, prefill - 1, decode + 1) });
  const best = moves.sort((a, b) => a.after - b.after)[0];
  return best !== undefined && best.after < current * (1 - s.hysteresis) ? best : undefined;
}

export class RatioRoleController implements RoleController {
  readonly #settings: RatioControllerSettings;
  readonly #capacity: RoleCapacity;
  #smoothed: Pressure | undefined;
  /** The move the last rounds' own demand asked for, and for how many rounds in a row. */
  #streak: { to: SplitRole; rounds: number } | undefined;
  #lastSwitchAt = Number.NEGATIVE_INFINITY;

  constructor(capacity: RoleCapacity, settings: Partial<RatioControllerSettings> = {}) {
    this.#capacity = capacity;
    this.#settings = { ...DEFAULT_RATIO_CONTROLLER, ...settings };
  }

  /** The smoothed pressure (engines' worth of work per side), for the pool's gauges. */
  get pressure(): Readonly<Pressure> | undefined {
    return this.#smoothed;
  }

  decide(engines: readonly RoleEngineState[], demand: RoleDemand, now: number): RoleDecision {
    const s = this.#settings;
    const round: Pressure = {
      prefill: sidePressure(demand.prefillTokensPerSec, this.#capacity.prefillTokensPerSec, demand.ttftP95Ms, s.ttftTargetMs),
      decode: sidePressure(demand.decodeTokensPerSec, this.#capacity.decodeTokensPerSec, demand.itlMs, s.itlTargetMs),
    };
    const before = this.#smoothed;
    const pressure: Pressure =
      before === undefined
        ? round
        : { prefill: before.prefill + s.smoothing * (round.prefill - before.prefill), decode: before.decode + s.smoothing * (round.decode - before.decode) };
    this.#smoothed = pressure;

    const { prefill, decode } = splitOf(engines);
    if (prefill.length + decode.length === 0) return { action: "hold", reason: "no_split_engines" };
    const asked = proposal(round, prefill.length, decode.length, s);
    this.#streak = asked === undefined ? undefined : { to: asked.to, rounds: this.#streak?.to === asked.to ? this.#streak.rounds + 1 : 1 };
    if (engines.some((e) => e.switching)) return { action: "hold", reason: "switch_in_progress" };
    if (now - this.#lastSwitchAt < s.cooldownMs) return { action: "hold", reason: "cooldown" };
    if (worstLoad(pressure, prefill.length, decode.length) < s.minLoadToAct) return { action: "hold", reason: "idle" };
    // The smoothed demand must want the move, and each of the last sustainRounds rounds' own demand too.
    const best = proposal(pressure, prefill.length, decode.length, s);
    if (best === undefined || this.#streak?.to !== best.to || this.#streak.rounds < s.sustainRounds) return { action: "hold", reason: "balanced" };
    const engine = engineToMove(best.to === "prefill" ? decode : prefill);
    if (engine === undefined) return { action: "hold", reason: "minimum_engines" };
    this.#lastSwitchAt = now;
    const from: SplitRole = best.to === "prefill" ? "decode" : "prefill";
    const reason = `${best.to} pressure: busier side ${best.current.toFixed(2)} → ${best.after.toFixed(2)} engines' work per engine`;
    return { action: "switch", switch: { engineId: engine.id, from, to: best.to, reason } };
  }
}
