import {
  enginesToMove,
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
 * demand. Each side's pressure is in engines' worth of work:
 * - prefill: the prefill work arriving per second, plus the backlog spread over
 *   `backlogHorizonMs` (a queue that built up must be cleared, not only kept level; in
 *   a closed loop of agents, arrivals fall as the queue grows, so arrivals alone would
 *   say less the worse it gets); the meter prices both by what recent prefills really
 *   computed (role-demand-meter.ts), so contexts evicted under load count;
 * - decode: the decode work per second, or the KV its calls hold and wait for over one
 *   engine's KV, whichever is more (long contexts bind on KV before compute, and calls
 *   waiting for a full decode side show up there).
 * The busier side per engine, `pressure / engines`, is what a switch must relieve:
 * engines move from the other side (the fewest that bring it to `targetLoad`, up to
 * `maxMovesPerDecision`) only when that lowers the busier side's load per engine by
 * more than the hysteresis margin, which a balanced split's noise cannot do. A donor
 * gives engines only while its own load per engine stays within `targetLoad` after the
 * move, and a side that misses its latency target (P95 TTFT for prefill, mean ITL for
 * decode) gives none: when both are short the split holds rather than swing between
 * them (without the donor rule, the queue that built on the side just robbed came back
 * as its pressure and the split swung between 3 and 6 prefill engines of 8). Demand is
 * smoothed over rounds (EWMA) and a move must also be asked for by each of the last
 * `sustainRounds` rounds' own demand; no switch starts while an engine drains or within
 * the cooldown of the last, and nothing moves while the busier side runs below
 * `minLoadToAct` of its engines. That
 * floor is low (0.3): a side at a third to two thirds of its engines already runs
 * larger batches, so slower steps, than it would on a balanced split, and a decode-heavy
 * mix on one or two idle prefill engines left every decode ~5 % slower than mixed
 * engines (bench:evolve at rate 0.5: 0.7 held the split through the math and coding
 * phases; README, "Evolving pools"). A longer wait before undoing a move was tried and
 * is not in: the mix can shift just after a move (README). An engine still finishing its old role's calls after an
 * overlapping switch counts in its new role and is not moved again until they are done.
 *
 * The defaults are for the default 2.5 s round (roles.ts DEFAULT_ROLE_ROUND_MS) and
 * switches that overlap: 4 sustain rounds (10 s) and a 7.5 s cooldown. The cooldown
 * mostly spaces moves the same way (a move back must first be asked for 4 rounds in a
 * row): after a shift to computer-use work near the pool's capacity, a 15 s cooldown
 * put the second move 28 s after the shift, and the queue built meanwhile outlived the
 * phase's first minute (bench:evolve --only capacity; README). With switches
 * that drained, 10 s rounds, 3 sustain rounds and a 30 s cooldown put every reaction
 * 30–60 s after a shift in the mix; with overlap a switch costs no idle engine, so the
 * controller can afford to act sooner (README, "Evolving pools"). Pure: the caller
 * passes the time.
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
  /** A move takes the fewest engines that bring the busier side's load per engine to this. */
  targetLoad: number;
  /** No switch starts within this long of the last one's start (ms). */
  cooldownMs: number;
  /** Engines one decision may move (one way): a large shift in the mix is followed in one step, not one engine per cooldown. */
  maxMovesPerDecision: number;
  /** The prefill backlog counts as work to do within this long (ms): by default the TTFT target, since a queue that takes longer to clear misses it. */
  backlogHorizonMs: number;
  /** Engines each side keeps. */
  minPrefillEngines: number;
  minDecodeEngines: number;
  /** Latency targets; a side that misses its target gives no engine away. */
  ttftTargetMs: number;
  itlTargetMs: number;
}

export const DEFAULT_RATIO_CONTROLLER: RatioControllerSettings = Object.freeze({
  smoothing: 0.3,
  hysteresis: 0.12,
  sustainRounds: 4,
  minLoadToAct: 0.3,
  targetLoad: 0.8,
  cooldownMs: 7_500,
  maxMovesPerDecision: 3,
  backlogHorizonMs: 2_000,
  minPrefillEngines: 1,
  minDecodeEngines: 1,
  ttftTargetMs: 2_000,
  itlTargetMs: 50,
});

/** Each side's pressure in engines' worth of work (see the top of this file). */
export function rolePressure(demand: RoleDemand, capacity: RoleCapacity, settings: RatioControllerSettings): Pressure {
  const prefillWork = Math.max(0, demand.prefillWorkMsPerSec) + (Math.max(0, demand.prefillBacklogMs) * 1_000) / Math.max(1, settings.backlogHorizonMs);
  return {
    prefill: prefillWork / 1_000,
    decode: Math.max(Math.max(0, demand.decodeWorkMsPerSec) / 1_000, Math.max(0, demand.decodeKvTokens) / Math.max(1, capacity.decodeKvTokens)),
  };
}

const misses = (latencyMs: number | undefined, targetMs: number): boolean => latencyMs !== undefined && latencyMs > targetMs;

export interface Pressure {
  prefill: number;
  decode: number;
}

/** The busier side's pressure per engine with `prefill` and `decode` engines. */
const worstLoad = (pressure: Pressure, prefill: number, decode: number): number =>
  Math.max(pressure.prefill / Math.max(prefill, 1e-9), pressure.decode / Math.max(decode, 1e-9));

interface Proposal {
  to: SplitRole;
  /** Engines to move. */
  count: number;
  /** The busier side's load per engine now, and after the move. */
  current: number;
  after: number;
}

/**
 * The move (up to `maxMovesPerDecision` engines one way, within each side's minimum and
 * never from a side that keeps its engines) that relieves the busier side by more than
 * the hysteresis margin: the fewest engines that bring its load per engine to
 * `targetLoad`, else the move that leaves it least loaded; undefined when none does.
 */
function proposal(pressure: Pressure, prefill: number, decode: number, s: RatioControllerSettings, keep: { prefill: boolean; decode: boolean }): Proposal | undefined {
  const current = worstLoad(pressure, prefill, decode);
  if (current < s.minLoadToAct) return undefined;
  const moves: Proposal[] = [];
  // The donor must keep its own load per engine within targetLoad: a move that only shifts the bottleneck is no move.
  const donorFits = (work: number, engines: number) => work / engines <= s.targetLoad;
  for (let count = 1; count <= s.maxMovesPerDecision; count++) {
    if (!keep.decode && decode - count >= s.minDecodeEngines && donorFits(pressure.decode, decode - count)) {
      moves.push({ to: "prefill", count, current, after: worstLoad(pressure, prefill + count, decode - count) });
    }
    if (!keep.prefill && prefill - count >= s.minPrefillEngines && donorFits(pressure.prefill, prefill - count)) {
      moves.push({ to: "decode", count, current, after: worstLoad(pressure, prefill - count, decode + count) });
    }
  }
  const relieving = moves.filter((move) => move.after < current * (1 - s.hysteresis));
  const enough = relieving.filter((move) => move.after <= s.targetLoad).sort((a, b) => a.count - b.count || a.after - b.after)[0];
  return enough ?? relieving.sort((a, b) => a.after - b.after || a.count - b.count)[0];
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
    const round = rolePressure(demand, this.#capacity, s);
    const before = this.#smoothed;
    const pressure: Pressure =
      before === undefined
        ? round
        : { prefill: before.prefill + s.smoothing * (round.prefill - before.prefill), decode: before.decode + s.smoothing * (round.decode - before.decode) };
    this.#smoothed = pressure;

    const { prefill, decode } = splitOf(engines);
    if (prefill.length + decode.length === 0) return { action: "hold", reason: "no_split_engines" };
    // A side missing its latency target keeps its engines.
    const keep = { prefill: misses(demand.ttftP95Ms, s.ttftTargetMs), decode: misses(demand.itlMs, s.itlTargetMs) };
    const asked = proposal(round, prefill.length, decode.length, s, keep);
    this.#streak = asked === undefined ? undefined : { to: asked.to, rounds: this.#streak?.to === asked.to ? this.#streak.rounds + 1 : 1 };
    if (engines.some((e) => e.switching)) return { action: "hold", reason: "switch_in_progress" };
    if (now - this.#lastSwitchAt < s.cooldownMs) return { action: "hold", reason: "cooldown" };
    if (worstLoad(pressure, prefill.length, decode.length) < s.minLoadToAct) return { action: "hold", reason: "idle" };
    // The smoothed demand must want the move, and each of the last sustainRounds rounds' own demand too.
    const best = proposal(pressure, prefill.length, decode.length, s, keep);
    if (best === undefined || this.#streak?.to !== best.to || this.#streak.rounds < s.sustainRounds) return { action: "hold", reason: "balanced" };
    const moving = enginesToMove(best.to === "prefill" ? decode : prefill, best.count);
    if (moving.length === 0) return { action: "hold", reason: "minimum_engines" };
    this.#lastSwitchAt = now;
    const from: SplitRole = best.to === "prefill" ? "decode" : "prefill";
    const reason = `${best.to} pressure: busier side ${best.current.toFixed(2)} → ${best.after.toFixed(2)} engines' work per engine`;
    return { action: "switch", switches: moving.map((engine) => ({ engineId: engine.id, from, to: best.to, reason })) };
  }
}
