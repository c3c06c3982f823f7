import type { ToolEvent } from "../protocol/tool-events.js";
import { Admission, type CallTokens, type DecodeCostModel, type HoldReason, standaloneCallMs } from "./admission.js";
import { type Dispatch, type DispatchSettings, pickAdmittedEngine, takeDispatches, validateDispatchSettings } from "./dispatch.js";
import type { EngineState } from "./engines.js";
import { AffinityTurnover } from "./kv/affinity-turnover.js";
import { ProgramQueue, type QueuedCall } from "./queue.js";
import type { PrefixMatcher, RoundRobinCursor } from "./routing.js";
import { DEFAULT_ADMISSION_SETTINGS, DEFAULT_KV_CAPACITY_TOKENS } from "./settings.js";
import { DEFAULT_TAO_SETTINGS, type TaoPlacementSettings, type TaoSettings } from "./tao/settings.js";
import { TaoPlacement, type TaoPlacementHooks, type TaoPlacementStats } from "./tao/tao-placement.js";
import { type CallEnd, ToolSignals, type ToolSignalsHooks } from "./tao/tool-signals.js";
import { chooseDecodeEngine, type AdmittedDecodeCandidate, DECODE_HOLD_MAX_MS, decodeCandidates, pickDecodeEngine } from "./roles/decode-placement.js";
import { type CallsByRole, EngineRoleBook, type RoleSwitchDone } from "./roles/engine-roles.js";
import type { RoleEngineReadings } from "./roles/role-demand-meter.js";
import type { EngineRole, RoleEngineState, RoleSwitch, RoleSwitchMode } from "./roles/roles.js";
import { ReleasingMap } from "./releasing-map.js";

/*
 * One pool core: everything the pool decides about calls, and nothing it does with
 * them. The pool service drives it on real time (src/pool/dispatcher.ts: HTTP, relays,
 * retries, metrics) and the simulator on virtual time (src/sim/des/simulate.ts: the
 * engine model), so every policy the benchmark compares is a setting a live pool can run.
 *
 * It holds
 * - the program queue (queue.ts: levels, tenants, anti-starvation);
 * - the engines' state as the pool sees it, and one KV account (admission.ts) of what
 *   was sent where, corrected by each metrics reading;
 * - admission: whether an engine may take the next call in order (KV room, step time,
 *   the safety limits); off by setting, the account still feeds TAO's engine views;
 * - a placement policy: "routing" (routing.ts: affinity, or a baseline: least-loaded,
 *   round-robin, cache-aware) deciding call by call among the admitting engines (an
 *   affinity hint whose engine has turned over its KV since is dropped at enqueue:
 *   kv/affinity-turnover.ts, fed by callLeft's usage), or
 *   "tao" (tao/tao-placement.ts) placing the waiting programs jointly under the same
 *   account's free KV;
 * - the tool signals (tao/tool-signals.ts: readiness predictor, cache credit), fed in
 *   every placement mode.
 *
 * - the engines' roles (roles/engine-roles.ts): a new call goes to an engine that
 *   prefills (prefill or mixed); a disaggregated call's decode is placed on a decode
 *   engine (placeDecode) and released by decodeEnded; a role switch either drains the
 *   engine or (an engine that serves both sides) overlaps: each call is counted by the
 *   role its engine had when it was given the call, so the book knows when the old
 *   role's last call left.
 *
 * A call's life here: enqueue → (pump hands it to an engine) → attemptEnded, repeated
 * by a driver that retries (route / requeue), and callLeft once when the call leaves
 * the pool whichever way. Every slot handed out is given back exactly once: a dispatch
 * is recorded by call ID and attemptEnded releases only what is recorded.
 *
 * Pure and deterministic: time is passed in; the optional stopwatch only times plans.
 */

export interface PoolCoreEngine {
  id: string;
  /** Safety cap on calls in flight (Infinity: none). */
  maxInFlight: number;
  /** The cap on split calls' decodes when it takes them: its batch (undefined: maxInFlight). */
  maxDecodes?: number | undefined;
  /** KV capacity (tokens); undefined: taken from the engine's metrics when they state it. */
  capacityTokens?: number | undefined;
  /** The engine's cost terms, for the step-time rule; undefined: no step-time rule. */
  costModel?: DecodeCostModel | undefined;
  /** Default "mixed": prefills and decodes its own calls. */
  role?: EngineRole | undefined;
  /** How it switches roles (roles/engine-roles.ts); default "drain". */
  switchMode?: RoleSwitchMode | undefined;
}

export type PoolPlacement = { policy: "routing" } | { policy: "tao"; settings: TaoPlacementSettings };

export interface PoolCoreOptions {
  settings: DispatchSettings;
  engines: readonly PoolCoreEngine[];
  /** Default "routing". */
  placement?: PoolPlacement;
  /** Readiness and cache-credit settings of the tool signals; default TAO's own (or the core defaults). */
  signals?: TaoSettings;
  /** "cache-aware" routing reads the caller's prefix trees. */
  prefixes?: PrefixMatcher<QueuedCall>;
  hooks?: ToolSignalsHooks & TaoPlacementHooks;
  stopwatch?: () => number;
}

export interface EngineReading {
  id: string;
  healthy: boolean;
  waiting: number;
  kvUsage: number;
  /** The engine's own statement of its KV capacity, if its metrics give one. */
  kvCapacityTokens?: number | undefined;
}

export interface PumpResult {
  dispatches: Dispatch[];
  /** Calls are left queued because the next in order had no engine to admit it: why (routing placement). */
  held: HoldReason | undefined;
  /** TAO: programs the plan left out for want of KV, held now. */
  heldPrograms: number;
  /** TAO: calls wait that no plan covers, or KV was freed while programs are held. */
  needsPlan: boolean;
  /** Earliest instant at which time alone may let a held call go: pump then. */
  wakeAt: number | undefined;
}

export interface AttemptEnd {
  /** Engine time the attempt took (ms), charged to its tenant's fair share. */
  serviceMs: number;
  /** Tokens the engine generated, when it said (a completed call teaches admission's output averages). */
  outputTokens?: number | undefined;
}

/** How often the signals drop what no longer matters (ms of the driver's clock). */
const SIGNALS_PRUNE_INTERVAL_MS = 5_000;

interface SentAttempt {
  engineId: string;
  call: QueuedCall;
  /** The engine's role when it was given the call (what a role switch waits for). */
  role: EngineRole;
}

export class PoolCore {
  readonly queue: ProgramQueue;
  /** The engines as the pool sees them (inFlight is the core's; health and readings the driver's). */
  readonly engines: EngineState[] = [];
  readonly signals: ToolSignals;
  /** The one KV account (and, when admission is on, the gate). */
  readonly kv: Admission;
  readonly placement: PoolPlacement["policy"];
  readonly settings: DispatchSettings;
  readonly #byId = new Map<string, EngineState>();
  readonly #configuredCapacity = new Set<string>();
  /** The account as admission's gate when admission is on (any placement's own routing); undefined when off. */
  readonly #admission: Admission | undefined;
  /** Routing placement's dispatch rounds go through the gate (TAO's plans use the account's views instead). */
  readonly #gate: boolean;
  readonly #tao: TaoPlacement | undefined;
  readonly #prefixes: PrefixMatcher<QueuedCall> | undefined;
  readonly #cursor: RoundRobinCursor = { next: 0 };
  readonly #sent = new ReleasingMap<string, SentAttempt>();
  /** Disaggregated calls' decodes, by call ID. */
  readonly #decodes = new ReleasingMap<string, SentAttempt>();
  readonly roles: EngineRoleBook;
  /** Affinity routing with a turnover setting: which hints name an engine that turned over its KV since. */
  readonly #turnover: AffinityTurnover | undefined;
  /** Hints dropped at enqueue because their engine turned over its KV (kv/affinity-turnover.ts). */
  affinityHintsDropped = 0;
  #lastPruneAt = Number.NEGATIVE_INFINITY;

  constructor(options: PoolCoreOptions) {
    validateDispatchSettings(options.settings);
    this.settings = options.settings;
    this.queue = new ProgramQueue(options.settings.queue);
    const placement = options.placement ?? { policy: "routing" };
    this.placement = placement.policy;
    this.#gate = options.settings.admission !== undefined && placement.policy === "routing";
    this.#prefixes = options.prefixes;
    const routing = options.settings.routing;
    this.#turnover =
      placement.policy === "routing" && (routing.policy ?? "affinity") === "affinity" && routing.affinityTurnover !== undefined
        ? new AffinityTurnover(routing.affinityTurnover)
        : undefined;
    for (const engine of options.engines) {
      if (this.#byId.has(engine.id)) throw new RangeError(`engine ids must be unique: ${engine.id}`);
      const state: EngineState = { id: engine.id, healthy: true, inFlight: 0, maxInFlight: engine.maxInFlight, maxDecodes: engine.maxDecodes, waiting: 0, kvUsage: 0 };
      this.engines.push(state);
      this.#byId.set(engine.id, state);
      if (engine.capacityTokens !== undefined) this.#configuredCapacity.add(engine.id);
    }
    this.roles = new EngineRoleBook(options.engines.map((engine) => ({ id: engine.id, role: engine.role ?? "mixed", switchMode: engine.switchMode })));
    this.kv = new Admission(
      options.settings.admission ?? DEFAULT_ADMISSION_SETTINGS,
      options.engines.map((engine) => ({ id: engine.id, capacityTokens: engine.capacityTokens, costModel: engine.costModel })),
    );
    this.#admission = options.settings.admission === undefined ? undefined : this.kv;
    const signalSettings = options.signals ?? (placement.policy === "tao" ? placement.settings.tao : DEFAULT_TAO_SETTINGS);
    this.signals = new ToolSignals(signalSettings, options.hooks);
    this.#tao =
      placement.policy === "tao"
        ? new TaoPlacement({
            settings: placement.settings,
            dispatch: options.settings,
            signals: this.signals,
            kv: {
              kvTarget: this.kv.settings.kvTarget,
              view: (engineId) => ({ capacityTokens: this.kvCapacityTokens(engineId), committedTokens: this.kv.projectedKvTokens(engineId) }),
            },
            ...(this.#admission === undefined ? {} : { admission: this.#admission }),
            ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
            ...(options.stopwatch === undefined ? {} : { stopwatch: options.stopwatch }),
          })
        : undefined;
  }

  engine(engineId: string): EngineState | undefined {
    return this.#byId.get(engineId);
  }

  /**
   * A call arrived at the pool. Throws when the queue refuses it (a duplicate, values out
   * of range). `prefixKept`: the caller's retention planner holds a keep of the call's
   * context on its hint's engine, so that engine's turnover does not count against it.
   */
  enqueue(call: QueuedCall, now: number, prefixKept = false): void {
    const hint = call.affinityEngine;
    const turnedOver = hint !== undefined && !prefixKept && this.#turnover?.stale(call.programId, hint, this.kvCapacityTokens(hint)) === true;
    // Routed as a call without a hint (routing.ts says why in the dispatch's reason), retries too: the queue keeps a copy, the caller this object.
    if (turnedOver) {
      delete call.affinityEngine;
      call.affinityTurnedOver = hint;
    }
    try {
      this.queue.enqueue(call);
    } catch (error) {
      // A refused call leaves as it came.
      if (turnedOver) {
        call.affinityEngine = hint;
        delete call.affinityTurnedOver;
      }
      throw error;
    }
    if (turnedOver) this.affinityHintsDropped += 1;
    this.signals.callArrived(call.programId, now);
  }

  /** A call whose attempt failed goes back to its place in the queue (its original enqueue time). */
  requeue(call: QueuedCall): void {
    this.queue.enqueue(call);
  }

  /** Takes a queued call out (its client went away); undefined when it was not queued. */
  dropQueued(callId: string): QueuedCall | undefined {
    return this.queue.remove(callId);
  }

  /**
   * Hands queued calls to engines while the placement finds room; every dispatch is
   * recorded (slot taken, KV account charged). `plan` (TAO): make a new plan first.
   */
  pump(now: number, options: { plan?: boolean } = {}): PumpResult {
    const tao = this.#tao;
    if (tao !== undefined) {
      const round = tao.round(this.queue, this.#placeable(), now, options.plan === true);
      // With admission, the calls TAO routed itself were charged to the account as they went; planned and reserved ones are charged here.
      for (const dispatch of round.dispatches) this.#record(dispatch, this.#admission === undefined || dispatch.reason === "tao-plan" || dispatch.reason === "tao-reserved");
      return { dispatches: round.dispatches, held: undefined, heldPrograms: round.held, needsPlan: round.needsPlan, wakeAt: round.wakeAt };
    }
    const round = takeDispatches(this.queue, this.#placeable(), now, this.settings, {
      cursor: this.#cursor,
      prefixes: this.#prefixes,
      admission: this.#gate ? this.kv : undefined,
    });
    // With the gate on, takeDispatches charged the account as it went (later choices in the round depend on it).
    for (const dispatch of round.dispatches) this.#record(dispatch, !this.#gate);
    return { dispatches: round.dispatches, held: round.held, heldPrograms: 0, needsPlan: false, wakeAt: undefined };
  }

  /** TAO: no plan in force (a round should plan). False under routing. */
  wantsPlan(now: number): boolean {
    return this.#tao?.needsPlan(now) ?? false;
  }

  /** TAO: something a periodic plan could act on (calls queued, programs between calls, reservations held). */
  hasPlanningWork(): boolean {
    return this.#tao !== undefined && (this.queue.size > 0 || this.signals.betweenCallsCount > 0 || this.#tao.reservationsHeld > 0);
  }

  /**
   * Routes one call at once (a retry after an attempt failed before its first byte),
   * among the engines not in `excluded` that admit it; records the dispatch. Undefined
   * when none will take it now (requeue it).
   */
  route(call: QueuedCall, excluded: ReadonlySet<string>, now: number): Dispatch | undefined {
    // Under either placement a retry goes through admission's account when admission is on.
    const candidates = this.#placeable().filter((engine) => !excluded.has(engine.id));
    const choice = pickAdmittedEngine(call, candidates, this.settings, this.#admission, this.#cursor);
    if (choice === undefined) return undefined;
    choice.engine.inFlight += 1;
    const dispatch: Dispatch = { call, engineId: choice.engine.id, level: 0, promoted: false, reason: choice.reason };
    this.#record(dispatch, true);
    return dispatch;
  }

  /**
   * The attempt left its engine (finished, failed, aborted): its slot and KV come back,
   * its service is charged to its tenant. Only a recorded attempt is released, once.
   */
  attemptEnded(callId: string, end: AttemptEnd, now: number): void {
    const sent = this.#sent.get(callId);
    if (sent === undefined) return;
    this.#sent.delete(callId);
    const engine = this.#byId.get(sent.engineId);
    if (engine !== undefined) engine.inFlight = Math.max(0, engine.inFlight - 1);
    this.kv.finished(sent.engineId, callId, end.outputTokens);
    this.#tao?.callEnded();
    this.queue.chargeTenant(sent.call.tenantId, end.serviceMs, now);
    this.#callsEnded(sent.engineId, now);
  }

  /**
   * A disaggregated call's prefill is done: places its decode on the decode engine with
   * the most KV room (roles/decode-placement.ts), not in `excluded`; records it (slot,
   * KV account). Undefined when no decode engine is healthy.
   */
  placeDecode(call: QueuedCall, excluded: ReadonlySet<string>): string | undefined {
    if (this.#decodes.has(call.callId)) return undefined;
    const engine = pickDecodeEngine(this.#decodeCandidates(excluded));
    if (engine === undefined) return undefined;
    return this.#recordDecode(call, engine);
  }

  /**
   * Like placeDecode, but only on a decode engine that admits a decode (below its decode
   * cap, no backlog of its own: roles/decode-placement.ts): when
   * none does, the decode is held (the caller asks again when capacity may have
   * appeared, with how long it has waited) until `heldMs` reaches the bound, then the
   * least loaded takes it (`maxHoldMs`, default DECODE_HOLD_MAX_MS; the simulator's
   * ablation sets it). Undefined when no decode engine is healthy.
   */
  admitDecode(call: QueuedCall, excluded: ReadonlySet<string>, heldMs: number, maxHoldMs = DECODE_HOLD_MAX_MS): { engineId: string } | { held: HoldReason } | undefined {
    if (this.#decodes.has(call.callId)) return undefined;
    const choice = chooseDecodeEngine(this.#decodeCandidates(excluded), heldMs, maxHoldMs);
    if (choice.kind === "none") return undefined;
    if (choice.kind === "hold") return { held: choice.reason };
    return { engineId: this.#recordDecode(call, choice.engine) };
  }

  #decodeEngines(excluded: ReadonlySet<string>): EngineState[] {
    this.#syncBacklogLimits();
    return this.engines.filter((engine) => !excluded.has(engine.id) && this.roles.takesDecodes(engine.id));
  }

  #decodeCandidates(excluded: ReadonlySet<string>): AdmittedDecodeCandidate[] {
    return decodeCandidates(this.#decodeEngines(excluded), this.kv, (id) => this.kvCapacityTokens(id), this.settings.saturation);
  }

  #recordDecode(call: QueuedCall, engine: EngineState): string {
    engine.inFlight += 1;
    this.kv.sent(engine.id, call);
    this.#decodes.set(call.callId, { engineId: engine.id, call, role: this.roles.role(engine.id) ?? "mixed" });
    return engine.id;
  }

  /** The decode left its engine: slot and KV back (once), its service charged. */
  decodeEnded(callId: string, end: AttemptEnd, now: number): void {
    const sent = this.#decodes.get(callId);
    if (sent === undefined) return;
    this.#decodes.delete(callId);
    const engine = this.#byId.get(sent.engineId);
    if (engine !== undefined) engine.inFlight = Math.max(0, engine.inFlight - 1);
    this.kv.finished(sent.engineId, callId, end.outputTokens);
    this.queue.chargeTenant(sent.call.tenantId, end.serviceMs, now);
    this.#callsEnded(sent.engineId, now);
  }

  /**
   * A disaggregated call whose decode failed before anything reached the client, sent
   * again whole: to a mixed engine that admits it, else to a decode engine (which, with
   * no KV handed to it, prefills the call itself); not to `excluded`. Recorded as the
   * call's attempt. Undefined when none takes it now.
   */
  routeRecompute(call: QueuedCall, excluded: ReadonlySet<string>): Dispatch | undefined {
    const open = this.engines.filter((engine) => !excluded.has(engine.id) && !this.roles.draining(engine.id));
    const mixed = open.filter((engine) => this.roles.role(engine.id) === "mixed");
    const decode = open.filter((engine) => this.roles.role(engine.id) === "decode");
    const choice =
      pickAdmittedEngine(call, mixed, this.settings, this.#admission, this.#cursor) ?? pickAdmittedEngine(call, decode, this.settings, this.#admission, this.#cursor);
    if (choice === undefined) return undefined;
    choice.engine.inFlight += 1;
    const dispatch: Dispatch = { call, engineId: choice.engine.id, level: 0, promoted: false, reason: choice.reason };
    this.#record(dispatch, true);
    return dispatch;
  }

  /** The engine a call's decode runs on; undefined when none does. */
  decodingOn(callId: string): string | undefined {
    return this.#decodes.get(callId)?.engineId;
  }

  /** Starts an engine's switch to another role (the role controller's), in the engine's mode; false when it cannot switch now. */
  startRoleSwitch(roleSwitch: RoleSwitch, now: number): boolean {
    return this.#byId.has(roleSwitch.engineId) && this.roles.startSwitch(roleSwitch, this.callsOn(roleSwitch.engineId), now);
  }

  /** The calls on an engine now, by the role it had when it was given each (its attempts and decodes). */
  callsOn(engineId: string): CallsByRole {
    const calls: Partial<Record<EngineRole, number>> = {};
    for (const map of [this.#sent, this.#decodes]) {
      for (const sent of map.values()) if (sent.engineId === engineId) calls[sent.role] = (calls[sent.role] ?? 0) + 1;
    }
    return calls;
  }

  /** A call left the engine: a switch under way there may be complete. */
  #callsEnded(engineId: string, now: number): void {
    if (this.roles.switching(engineId)) this.roles.callsEnded(engineId, this.callsOn(engineId), now);
  }

  /** The engines as a role controller reads them (load: calls on each). */
  roleStates(): RoleEngineState[] {
    return this.roles.states((id) => this.#byId.get(id)?.inFlight ?? 0);
  }

  /** What the role demand meter cannot see, from the last readings: the decode engines' KV, and the calls waiting for prefill (the queue's and the prefill engines' own). */
  roleReadings(): RoleEngineReadings {
    let decodeKvTokens = 0;
    let decodeKvUsage = 0;
    let decodeEngines = 0;
    let prefillQueue = this.queue.size;
    for (const state of this.engines) {
      const role = this.roles.role(state.id);
      if (role === "decode") {
        decodeKvTokens += state.kvUsage * this.kvCapacityTokens(state.id);
        decodeKvUsage += state.kvUsage;
        decodeEngines += 1;
      } else if (role === "prefill") prefillQueue += state.waiting;
    }
    return { decodeKvTokens, prefillQueue, decodeKvUsage: decodeEngines === 0 ? 0 : decodeKvUsage / decodeEngines };
  }

  /** Role switches that completed (drained, or the old role's last call left) since the last call. */
  takeFinishedRoleSwitches(): RoleSwitchDone[] {
    return this.roles.takeFinished();
  }

  /** The engine an attempt of the call is running on; undefined when none is. */
  runningOn(callId: string): string | undefined {
    return this.#sent.get(callId)?.engineId;
  }

  /** The call left the pool (answered, failed, abandoned): once per call, whatever its attempts. */
  callLeft(programId: string, end: CallEnd, now: number): void {
    this.signals.callEnded(programId, now, end);
    const usage = end.facts?.usage;
    if (end.engineId !== undefined && usage !== undefined) this.#turnover?.callLeft(programId, end.engineId, usage);
  }

  /** The program is over: its reservation is released and what the signals knew of it forgotten. */
  programEnded(programId: string): void {
    this.#tao?.programEnded(programId, this.engines);
    this.signals.forgetProgram(programId);
    this.#turnover?.forgetProgram(programId);
  }

  /** A metrics reading of the engines (health, waiting, KV use, stated capacity). */
  engineReadings(readings: readonly EngineReading[], now: number): void {
    for (const reading of readings) {
      const engine = this.#byId.get(reading.id);
      if (engine === undefined) continue;
      // An engine that went down most likely lost its cache (restart, replacement).
      if (engine.healthy && !reading.healthy) this.signals.credits.forgetEngine(reading.id);
      engine.healthy = reading.healthy;
      engine.waiting = reading.waiting;
      engine.kvUsage = reading.kvUsage;
      const stated = this.#configuredCapacity.has(reading.id) ? undefined : reading.kvCapacityTokens;
      this.kv.scraped(reading.id, reading.kvUsage, stated);
    }
    this.queue.forgetIdleTenants(now);
    if (now - this.#lastPruneAt >= SIGNALS_PRUNE_INTERVAL_MS) {
      this.#lastPruneAt = now;
      this.signals.prune(now);
    }
  }

  /** A connection to the engine failed: out of rotation until a reading says otherwise; its cache is presumed lost. */
  engineDown(engineId: string): void {
    const engine = this.#byId.get(engineId);
    if (engine === undefined) return;
    engine.healthy = false;
    this.signals.credits.forgetEngine(engineId);
  }

  /** A batch of the client's tool events; `edgeTs` is its signed timestamp. Returns how many were applied. */
  toolEvents(programId: string, events: readonly ToolEvent[], now: number, edgeTs: number): number {
    return this.signals.toolEvents(programId, events, now, edgeTs);
  }

  /** Whether serviceMs reads a call's tokens on this engine (a cost model, and service "work"); else it is the wall time. */
  serviceReadsUsage(engineId: string): boolean {
    return (this.settings.service ?? "work") !== "wall" && this.kv.costModel(engineId) !== undefined;
  }

  /**
   * The service an attempt is charged (the program's value, the tenant's share): its
   * standalone engine time from the engine's cost model and the tokens it reported
   * ("work"), else the wall time it took (setting "wall", no cost model, no usage).
   */
  serviceMs(engineId: string, wallMs: number, tokens?: CallTokens): number {
    const model = this.kv.costModel(engineId);
    if ((this.settings.service ?? "work") === "wall" || model === undefined || tokens === undefined) return wallMs;
    return standaloneCallMs(model, tokens);
  }

  /** KV capacity per engine as the account knows it, else the default TAO plans with. */
  kvCapacityTokens(engineId: string): number {
    return this.kv.capacityTokens(engineId) ?? DEFAULT_KV_CAPACITY_TOKENS;
  }

  get reservationsHeld(): number {
    return this.#tao?.reservationsHeld ?? 0;
  }

  /** TAO's figures; undefined under routing. */
  taoStats(): TaoPlacementStats | undefined {
    return this.#tao?.stats();
  }

  /** The engines a new call may go to: all of them unless roles say otherwise (the same array then, so nothing changes for a mixed pool). */
  #placeable(): EngineState[] {
    if (!this.roles.split) return this.engines;
    this.#syncBacklogLimits();
    return this.engines.filter((engine) => this.roles.takesNewCalls(engine.id));
  }

  /**
   * A prefill engine's waiting queue is its normal state (engines.ts maxWaiting); a mixed or
   * decode one's is a backlog. Set on every engine from its role at each decision, so one
   * that switched out of prefill is not left unbounded.
   */
  #syncBacklogLimits(): void {
    for (const engine of this.engines) engine.maxWaiting = this.roles.role(engine.id) === "prefill" ? Number.POSITIVE_INFINITY : undefined;
  }

  #record(dispatch: Dispatch, chargeAccount: boolean): void {
    this.#sent.set(dispatch.call.callId, { engineId: dispatch.engineId, call: dispatch.call, role: this.roles.role(dispatch.engineId) ?? "mixed" });
    if (chargeAccount) this.kv.sent(dispatch.engineId, dispatch.call);
  }
}
