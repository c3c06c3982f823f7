import type { UnofficialStatusCode } from "hono/utils/http-status";
import type { Dispatcher as HttpDispatcher } from "undici";
import { Admission, type HoldReason } from "../core/admission.js";
import type { Clock } from "../core/clock.js";
import { type DispatchSettings, takeDispatches } from "../core/dispatch.js";
import type { EngineState } from "../core/engines.js";
import { ProgramQueue, type QueuedCall } from "../core/queue.js";
import { chooseEngine, type RoundRobinCursor } from "../core/routing.js";
import { type ChatCompletionRequest, requestedMaxTokens } from "../protocol/chat.js";
import type { ForwardFields } from "../protocol/forward.js";
import { estimatePromptTokens } from "../protocol/tokens.js";
import type { ToolEvent } from "../protocol/tool-events.js";
import { READINESS_SOURCES } from "../core/tao/readiness.js";
import { CALL_ERROR_MESSAGES, callError, callErrorResponse } from "./call-errors.js";
import { DEFAULT_KV_CAPACITY_TOKENS, type EngineConfig } from "./config.js";
import { adapterFor } from "./engines/index.js";
import type { EngineReading } from "./engine-monitor.js";
import type { CallOutcome, PoolMetrics, PoolStateSource } from "./metrics.js";
import { type EngineTarget, type RelayEnd, type RelayStart, relayToEngine } from "./relay.js";
import { type PlacementSettings, TaoConfig } from "./tao/config.js";
import { PlanLoop } from "./tao/plan-loop.js";
import { PoolTaoPlacement, type TaoPlacementStats } from "./tao/tao-placement.js";
import { type ProgramSignals, ToolSignals } from "./tao/tool-signals.js";

/*
 * The pool's live state: the program-level queue (core), what each engine is running,
 * and the calls in between. Whenever capacity may have appeared (a call arrives, one
 * finishes, engine readings change) it asks the core's takeDispatches which calls go
 * where, and starts their relays. Scheduling rules live in core only.
 *
 * Retry: an attempt that fails before the engine's first byte is tried again, up to
 * `retries` more times, first directly on another available engine (the failed ones
 * excluded; it was already chosen by priority), else back into the queue with its
 * original enqueue time, i.e. ahead of later calls of its level.
 *
 * Placement: "routing" (default) asks takeDispatches, which routes call by call;
 * "tao" asks the pool's TAO placement (tao/tao-placement.ts), which plans off the
 * request path (tao/plan-loop.ts) and falls back to routing for calls a plan leaves
 * out. Either way the readiness predictor and cache-credit ledger (tao/tool-signals.ts)
 * are fed from every call's arrival and end, and from the client's tool events. A retry
 * after an engine failure is routed by the routing rule in both modes.
 */

export interface DispatcherOptions {
  engines: readonly EngineConfig[];
  settings: DispatchSettings;
  clock: Clock;
  metrics: PoolMetrics;
  http: HttpDispatcher;
  retries: number;
  maxQueuedCalls: number;
  noHealthyEngineGraceMs: number;
  retryAfterSeconds: number;
  /** A relay could not connect to this engine. */
  onEngineDown?: (engineId: string) => void;
  /** Placement policy and TAO settings; default: "routing", with the core's TAO defaults for the predictor. */
  placement?: PlacementSettings;
  /** Model names a call may ask for (pool config `models`); undefined: any. */
  models?: readonly string[] | undefined;
}

export interface CallSubmission {
  fields: ForwardFields;
  request: ChatCompletionRequest;
  /** Client body to forward (adapters add the engine's fields). */
  body: Record<string, unknown>;
  /** Aborts when the client goes away. */
  signal: AbortSignal;
}

interface EngineSlot {
  state: EngineState;
  target: EngineTarget;
  model: string | undefined;
}

type CallStage = "queued" | "running" | "done";

interface PendingCall {
  call: QueuedCall;
  body: Record<string, unknown>;
  stream: boolean;
  signal: AbortSignal;
  stage: CallStage;
  level: number;
  retriesLeft: number;
  failedEngines: Set<string>;
  attempt?: { engineId: string; controller: AbortController };
  resolve(response: Response): void;
  detach(): void;
}

/** What /health and tests can read. */
export interface EngineSnapshot extends EngineState {
  kind: string;
  /** KV capacity TAO plans with: configured, else stated by the engine's metrics, else the default. */
  kvCapacityTokens: number;
}

/** What the pool knows about one program for TAO (inspection). */
export interface ProgramInspection extends ProgramSignals {
  placement: PlacementSettings["policy"];
}

/** How often the predictor, ledger and trackers drop what no longer matters. */
const SIGNALS_PRUNE_INTERVAL_MS = 5_000;

export class Dispatcher {
  readonly queue: ProgramQueue;
  readonly #options: DispatcherOptions;
  readonly #slots = new Map<string, EngineSlot>();
  /** The array handed to the core; its objects are the slots' states. */
  readonly #states: EngineState[] = [];
  readonly #calls = new Map<string, PendingCall>();
  readonly #idle = new Set<() => void>();
  /** The readiness predictor and cache-credit ledger, fed in every placement mode. */
  readonly signals: ToolSignals;
  readonly #placement: PlacementSettings;
  readonly #tao: PoolTaoPlacement | undefined;
  /** KV capacity per engine (tokens); engines configured with one keep it, the others take their metrics'. */
  readonly #kvCapacity = new Map<string, number>();
  readonly #kvConfigured = new Set<string>();
  readonly #planLoop: PlanLoop | undefined;
  /** Left-out programs TAO held in the queue at the last pump (a gauge). */
  #heldPrograms = 0;
  /** Admission by KV room and step time (core/admission.ts); undefined when turned off, and under TAO, which plans KV itself. */
  readonly #admission: Admission | undefined;
  readonly #cursor: RoundRobinCursor = { next: 0 };
  /** Why the last pump left calls waiting. */
  #held: HoldReason | undefined;
  #lastHealthyAt: number;
  #lastPruneAt: number;
  #closed = false;
  readonly #models: ReadonlySet<string> | undefined;

  constructor(options: DispatcherOptions) {
    this.#options = options;
    this.#models = options.models === undefined ? undefined : new Set(options.models);
    this.queue = new ProgramQueue(options.settings.queue);
    const { metrics } = options;
    this.#placement = options.placement ?? { policy: "routing", tao: TaoConfig.parse({}) };
    this.signals = new ToolSignals(this.#placement.tao.core, {
      onPrediction: (source) => metrics.readinessPredictions.inc({ source }),
      onToolEvent: (type, outcome) => metrics.toolEvents.inc({ type, outcome }),
    });
    for (const engine of options.engines) {
      const state: EngineState = {
        id: engine.id,
        healthy: true,
        inFlight: 0,
        maxInFlight: engine.maxInFlight,
        waiting: 0,
        kvUsage: 0,
      };
      const target: EngineTarget = { id: engine.id, url: engine.url, apiKey: engine.apiKey, adapter: adapterFor(engine.kind) };
      this.#slots.set(engine.id, { state, target, model: engine.model });
      this.#states.push(state);
    }
    this.#lastHealthyAt = options.clock.now();
    this.#lastPruneAt = this.#lastHealthyAt;
    for (const engine of options.engines) {
      this.#kvCapacity.set(engine.id, engine.kvCapacityTokens ?? DEFAULT_KV_CAPACITY_TOKENS);
      if (engine.kvCapacityTokens !== undefined) this.#kvConfigured.add(engine.id);
    }
    const admission = options.settings.admission;
    this.#admission =
      admission === undefined || this.#placement.policy === "tao"
        ? undefined
        : new Admission(
            admission,
            options.engines.map((engine) => ({ id: engine.id, capacityTokens: engine.kvCapacityTokens, costModel: engine.decodeCost })),
          );
    if (this.#placement.policy === "tao") {
      const settings = this.#placement.tao;
      this.#tao = new PoolTaoPlacement({
        settings,
        dispatch: options.settings,
        signals: this.signals,
        kvCapacityTokens: this.#kvCapacity,
        hooks: {
          onPlan: (plan, wallMs) => {
            metrics.taoPlans.inc({ method: plan.method });
            if (plan.fellBack) metrics.taoPlannerFallbacks.inc();
            metrics.taoPlanSeconds.observe(wallMs / 1000);
          },
          onPlanError: (error) => {
            metrics.taoPlanErrors.inc();
            console.error("agentix pool: TAO planning failed; routing every call until a plan succeeds", error);
          },
          onStale: (reason) => metrics.taoStaleEntries.inc({ reason }),
          onReservation: (outcome) => metrics.taoReservations.inc({ outcome }),
        },
      });
      this.#planLoop = new PlanLoop({
        minIntervalMs: settings.replanMinIntervalMs,
        periodMs: settings.planIntervalMs,
        now: () => this.#options.clock.now(),
        plan: () => this.#planAndPump(),
        tick: () => this.#periodicRound(),
      });
      this.#planLoop.start();
    }
    const source: PoolStateSource = {
      depthByLevel: () => this.queue.depthByLevel(this.#options.clock.now()),
      engineStates: () => this.#states,
      reservationsHeld: () => this.#tao?.reservationsHeld ?? 0,
      heldPrograms: () => this.#heldPrograms,
      readinessAccuracy: () => {
        const accuracy = this.signals.readiness.accuracy();
        return Object.fromEntries([...READINESS_SOURCES, "all" as const].map((key) => [key, accuracy[key]]));
      },
      cacheRetention: () => this.#states.map((state) => ({ engine: state.id, retention: this.signals.credits.retention(state.id) })),
      holdReason: () => (this.queue.size > 0 ? this.#held : undefined),
      admissionProjections: () => {
        const admission = this.#admission;
        if (admission === undefined) return [];
        return this.#states.map((state) => ({
          engine: state.id,
          kvTokens: admission.projectedKvTokens(state.id),
          stepMs: admission.projectedStepMs(state),
        }));
      },
    };
    options.metrics.observe(source);
  }

  get placementPolicy(): PlacementSettings["policy"] {
    return this.#placement.policy;
  }

  /**
   * Queues a call. Throws (an OpenAI-shaped HTTPException) when it cannot be queued;
   * otherwise the promise settles with the response to send and never rejects.
   */
  submit(submission: CallSubmission): Promise<Response> {
    const { fields, request, body, signal } = submission;
    const { metrics, clock } = this.#options;
    const now = clock.now();
    const unavailable = (reason: "queue_full" | "no_healthy_engine" | "shutting_down", message: string) => {
      metrics.reject(reason);
      return callError(503, message, fields.call, { code: reason, headers: this.#retryAfter() });
    };
    if (this.#closed) throw unavailable("shutting_down", "The pool is shutting down");
    if (this.queue.size >= this.#options.maxQueuedCalls) throw unavailable("queue_full", "The pool queue is full");
    if (this.#noHealthyEngineTooLong(now)) throw unavailable("no_healthy_engine", "No healthy engine in this pool");
    if (this.#calls.has(fields.call)) throw callError(409, "This call is already in progress", fields.call, { code: "duplicate_call" });
    if (this.#models !== undefined && !this.#models.has(request.model)) {
      metrics.reject("model_not_found");
      throw callError(404, `The model ${JSON.stringify(request.model.slice(0, 100))} does not exist or you do not have access to it`, fields.call, {
        // OpenAI's own answer to an unknown model: 404 with type invalid_request_error.
        type: "invalid_request_error",
        code: "model_not_found",
        param: "model",
      });
    }

    const call: QueuedCall = {
      callId: fields.call,
      tenantId: fields.tenant,
      programId: fields.program,
      threadId: fields.thread,
      serviceMs: fields.serviceMs,
      pathMs: fields.pathMs,
      waitMs: fields.waitMs,
      weight: fields.weight,
      promptTokens: estimatePromptTokens(request),
      enqueuedAt: now,
    };
    if (fields.engine !== "") call.affinityEngine = fields.engine;
    const maxTokens = requestedMaxTokens(request);
    if (maxTokens !== undefined) call.maxTokens = maxTokens;

    let resolve!: (response: Response) => void;
    const response = new Promise<Response>((settle) => {
      resolve = settle;
    });
    if (signal.aborted) {
      metrics.cancelled.inc({ stage: "queued" });
      resolve(clientClosedResponse(call.callId));
      return response;
    }
    try {
      this.queue.enqueue(call);
    } catch (error) {
      // The core validates the call (e.g. a value that overflowed to Infinity): the edge sent bad figures.
      metrics.reject("invalid_request");
      throw callError(400, `Invalid forwarded call: ${error instanceof Error ? error.message : String(error)}`, call.callId, {
        code: "invalid_forward_headers",
      });
    }
    const onAbort = () => this.#clientGone(pending);
    const pending: PendingCall = {
      call,
      body,
      stream: request.stream === true,
      signal,
      stage: "queued",
      level: 0,
      retriesLeft: this.#options.retries,
      failedEngines: new Set(),
      resolve,
      detach: () => signal.removeEventListener("abort", onAbort),
    };
    this.#calls.set(call.callId, pending);
    signal.addEventListener("abort", onAbort, { once: true });
    this.signals.callArrived(call.programId, now);
    this.pump();
    if (pending.stage === "queued") metrics.callsHeld.inc({ reason: this.#held ?? "count" });
    return response;
  }

  /**
   * Applies a batch of the client's tool events (forwarded by the edge, verified by the
   * caller); `edgeTs` is the batch's signed timestamp. Returns how many were applied.
   */
  toolEvents(programId: string, events: readonly ToolEvent[], edgeTs: number): number {
    const now = this.#options.clock.now();
    const applied = this.signals.toolEvents(programId, events, now, edgeTs);
    // A program ready soon may be worth a reservation now, not at the next round.
    if (applied > 0) this.#planLoop?.request();
    return applied;
  }

  /** What the pool knows about a program for TAO; undefined when nothing. */
  inspectProgram(programId: string): ProgramInspection | undefined {
    const signals = this.signals.inspect(programId, this.#options.clock.now());
    return signals === undefined ? undefined : { ...signals, placement: this.#placement.policy };
  }

  /** The TAO placement's figures; undefined under "routing". */
  taoStats(): TaoPlacementStats | undefined {
    return this.#tao?.stats();
  }

  /** Applies the monitor's readings, then dispatches into any capacity they opened. */
  updateEngines(readings: readonly EngineReading[]): void {
    const now = this.#options.clock.now();
    this.#noteHealth(now);
    for (const reading of readings) {
      const slot = this.#slots.get(reading.id);
      if (slot === undefined) continue;
      // An engine that went down most likely lost its cache (restart, replacement).
      if (slot.state.healthy && !reading.healthy) this.signals.credits.forgetEngine(reading.id);
      slot.state.healthy = reading.healthy;
      slot.state.waiting = reading.waiting;
      slot.state.kvUsage = reading.kvUsage;
      const statedCapacity = this.#kvConfigured.has(reading.id) ? undefined : reading.kvCapacityTokens;
      if (statedCapacity !== undefined) this.#kvCapacity.set(reading.id, statedCapacity);
      this.#admission?.scraped(reading.id, reading.kvUsage, statedCapacity);
    }
    this.queue.forgetIdleTenants(now);
    if (now - this.#lastPruneAt >= SIGNALS_PRUNE_INTERVAL_MS) {
      this.#lastPruneAt = now;
      this.signals.prune(now);
    }
    this.pump();
  }

  /** Hands queued calls to engines while any can take one. */
  pump(): void {
    this.#pumpAt(this.#options.clock.now());
  }

  #pumpAt(now: number): void {
    if (this.#closed) return;
    const { metrics } = this.#options;
    if (this.#noHealthyEngineTooLong(now)) {
      this.#failQueued(503, "No healthy engine in this pool", "no_healthy_engine");
      return;
    }
    for (const dispatch of this.#takeDispatches(now)) {
      const pending = this.#calls.get(dispatch.call.callId);
      const slot = this.#slots.get(dispatch.engineId);
      if (pending === undefined || slot === undefined) {
        // Cannot happen (every queued call is tracked); give the slot back rather than leak it.
        if (slot) slot.state.inFlight -= 1;
        continue;
      }
      metrics.dispatches.inc({ engine: dispatch.engineId, reason: dispatch.reason });
      if (dispatch.promoted) metrics.promotions.inc();
      if (pending.failedEngines.size === 0) metrics.queueSeconds.observe((now - pending.call.enqueuedAt) / 1000);
      pending.level = dispatch.level;
      this.#start(pending, slot, now);
    }
  }

  engineSnapshots(): EngineSnapshot[] {
    return this.#states.map((state) => ({
      ...state,
      kind: this.#slots.get(state.id)?.target.adapter.kind ?? "unknown",
      kvCapacityTokens: this.#kvCapacity.get(state.id) ?? DEFAULT_KV_CAPACITY_TOKENS,
    }));
  }

  get queuedCount(): number {
    return this.queue.size;
  }

  get runningCount(): number {
    let running = 0;
    for (const pending of this.#calls.values()) if (pending.stage === "running") running += 1;
    return running;
  }

  hasHealthyEngine(): boolean {
    return this.#states.some((state) => state.healthy);
  }

  /**
   * Refuses new calls, answers queued ones 503, aborts running ones, and waits (at
   * most `graceMs`) for their engine requests to end.
   */
  async close(graceMs = 2_000): Promise<void> {
    if (!this.#closed) {
      this.#planLoop?.stop();
      this.#failQueued(503, "The pool is shutting down", "shutting_down");
      this.#closed = true;
      for (const pending of this.#calls.values()) pending.attempt?.controller.abort(new Error("pool shutting down"));
    }
    if (this.#calls.size === 0) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#idle.delete(done);
        resolve();
      };
      const timer = setTimeout(done, graceMs);
      this.#idle.add(done);
    });
  }

  /** The calls to send now, and where: by the placement policy. */
  #takeDispatches(now: number) {
    const tao = this.#tao;
    if (tao === undefined) {
      const round = takeDispatches(this.queue, this.#states, now, this.#options.settings, { cursor: this.#cursor, admission: this.#admission });
      this.#held = round.held;
      if (round.held !== undefined) this.#options.metrics.holdRounds.inc({ reason: round.held });
      return round.dispatches;
    }
    const { dispatches, needsPlan, held } = tao.pump(this.queue, this.#states, now);
    this.#heldPrograms = held;
    if (needsPlan) this.#planLoop?.request();
    return dispatches;
  }

  #planAndPump(): void {
    if (this.#closed || this.#tao === undefined) return;
    // One instant for both: a readiness probe answered at the plan's instant answers the same when re-validated.
    const now = this.#options.clock.now();
    this.#tao.plan(this.queue, this.#states, now);
    this.#pumpAt(now);
  }

  /** TAO's periodic round: plan while anything is queued, between calls, or reserved; otherwise just pump. */
  #periodicRound(): void {
    if (this.#closed || this.#tao === undefined) return;
    if (this.queue.size > 0 || this.signals.betweenCallsCount > 0 || this.#tao.reservationsHeld > 0) this.#planLoop?.planNow();
    else this.pump();
  }

  #start(pending: PendingCall, slot: EngineSlot, now: number): void {
    const controller = new AbortController();
    this.#tao?.callDispatched(slot.state.id, pending.call.promptTokens);
    pending.stage = "running";
    pending.attempt = { engineId: slot.state.id, controller };
    const body = slot.target.adapter.buildBody(pending.body, {
      level: pending.level,
      levels: this.#options.settings.queue.levels,
      model: slot.model,
    });
    relayToEngine({
      engine: slot.target,
      callId: pending.call.callId,
      body,
      stream: pending.stream,
      queueMs: now - pending.call.enqueuedAt,
      dispatchedAt: now,
      signal: controller.signal,
      http: this.#options.http,
      clock: this.#options.clock,
      onEnd: (end) => this.#attemptEnded(pending, slot, end),
    }).then(
      (start) => this.#attemptStarted(pending, slot, start),
      (error: unknown) => {
        // relayToEngine handles its own failures; this is a bug guard, not a path.
        console.error(`agentix pool: call ${pending.call.callId}: relay to engine ${slot.state.id} threw`, error);
        if (pending.stage !== "done") this.#release(slot, "failed", pending);
        this.#finish(pending, callErrorResponse(500, CALL_ERROR_MESSAGES.internal_error, pending.call.callId, { code: "internal_error" }));
        this.pump();
      },
    );
  }

  #attemptEnded(pending: PendingCall, slot: EngineSlot, end: RelayEnd): void {
    const { metrics, clock } = this.#options;
    const engine = slot.state.id;
    this.#release(slot, end.outcome, pending, end.facts?.usage?.completionTokens);
    this.queue.chargeTenant(pending.call.tenantId, end.serviceMs, clock.now());
    metrics.serviceSeconds.observe({ engine }, end.serviceMs / 1000);
    if (end.outcome === "completed") metrics.cacheObservations.inc({ engine, usage: end.facts?.usage ? "reported" : "estimated" });
    const usage = end.facts?.usage;
    if (usage !== undefined) {
      metrics.engineTokens.inc({ engine, kind: "prompt", outcome: end.outcome }, usage.promptTokens);
      metrics.engineTokens.inc({ engine, kind: "completion", outcome: end.outcome }, usage.completionTokens);
    }
    if (end.outcome === "aborted" || end.outcome === "failed") {
      // The engine's work for a call nobody received in full: on record here, whatever the edge could settle.
      const work = usage === undefined ? "no usage reported" : `engine reported ${usage.promptTokens} prompt + ${usage.completionTokens} completion tokens`;
      console.info(`agentix pool: call ${pending.call.callId} ${end.outcome} on engine ${engine} after ${end.serviceMs} ms; ${work}`);
    }
    pending.stage = "done";
    this.#forget(pending, end);
    this.pump();
  }

  #attemptStarted(pending: PendingCall, slot: EngineSlot, start: RelayStart): void {
    if (start.kind === "response") {
      pending.resolve(start.response);
      return;
    }
    const callId = pending.call.callId;
    if (start.kind === "aborted") {
      this.#finish(pending, this.#closed ? shuttingDownResponse(callId, this.#retryAfter()) : clientClosedResponse(callId));
      return;
    }
    // Failed before the first byte: the engine did no work for the call, nothing is charged.
    const engineId = slot.state.id;
    console.warn(`agentix pool: call ${callId}: attempt failed before the first byte: ${start.reason}`);
    pending.failedEngines.add(engineId);
    if (start.connectionFailed) {
      slot.state.healthy = false;
      this.signals.credits.forgetEngine(engineId);
      this.#options.onEngineDown?.(engineId);
    }
    this.#release(slot, "engine_error", pending);
    if (this.#closed) {
      this.#finish(pending, shuttingDownResponse(callId, this.#retryAfter()));
    } else if (pending.signal.aborted) {
      this.#finish(pending, clientClosedResponse(callId));
    } else if (pending.retriesLeft <= 0) {
      console.error(`agentix pool: call ${callId}: no engine could serve it after ${this.#options.retries + 1} attempt(s); last: ${start.reason}`);
      this.#finish(pending, callErrorResponse(502, CALL_ERROR_MESSAGES.engine_unavailable, callId, { code: "engine_unavailable" }));
    } else {
      pending.retriesLeft -= 1;
      this.#options.metrics.retries.inc({ engine: engineId });
      this.#retry(pending);
    }
    this.pump();
  }

  /** The attempt left the engine; `outputTokens` is what it generated, when the engine said. */
  #release(slot: EngineSlot, outcome: CallOutcome, pending: PendingCall, outputTokens?: number): void {
    this.#tao?.callReleased(slot.state.id, pending.call.promptTokens);
    this.#admission?.finished(slot.state.id, pending.call.callId, outcome === "completed" ? outputTokens : undefined);
    slot.state.inFlight = Math.max(0, slot.state.inFlight - 1);
    this.#options.metrics.calls.inc({ engine: slot.state.id, outcome });
  }

  #retry(pending: PendingCall): void {
    const { settings, clock, metrics } = this.#options;
    const admission = this.#admission;
    const candidates = this.#states.filter(
      (state) =>
        !pending.failedEngines.has(state.id) && (admission === undefined || admission.holdReason(state, pending.call, settings.saturation) === undefined),
    );
    // Admission already judged the candidates' KV: the scraped-KV limit is its, not routing's.
    const saturation = admission === undefined ? settings.saturation : { ...settings.saturation, maxKvUsage: Infinity };
    const route = chooseEngine(pending.call, candidates, settings.routing, saturation, this.#cursor);
    const slot = route && this.#slots.get(route.engineId);
    if (route && slot) {
      slot.state.inFlight += 1;
      admission?.sent(slot.state.id, pending.call);
      metrics.dispatches.inc({ engine: route.engineId, reason: route.reason });
      this.#start(pending, slot, clock.now());
      return;
    }
    // No other engine free now: wait in the queue at the call's original place.
    pending.stage = "queued";
    pending.attempt = undefined;
    this.queue.enqueue(pending.call);
  }

  #clientGone(pending: PendingCall): void {
    const { metrics } = this.#options;
    if (pending.stage === "queued") {
      this.queue.remove(pending.call.callId);
      metrics.cancelled.inc({ stage: "queued" });
      this.#finish(pending, clientClosedResponse(pending.call.callId));
    } else if (pending.stage === "running") {
      metrics.cancelled.inc({ stage: "running" });
      // The relay sees the abort, ends the attempt, and #attemptEnded frees the slot.
      pending.attempt?.controller.abort(new Error("client disconnected"));
    }
  }

  #failQueued(status: 503, message: string, code: "no_healthy_engine" | "shutting_down"): void {
    for (const pending of [...this.#calls.values()]) {
      if (pending.stage !== "queued") continue;
      this.queue.remove(pending.call.callId);
      this.#options.metrics.reject(code);
      this.#finish(pending, callErrorResponse(status, message, pending.call.callId, { code, headers: this.#retryAfter() }));
    }
  }

  #finish(pending: PendingCall, response: Response): void {
    pending.stage = "done";
    this.#forget(pending);
    pending.resolve(response);
  }

  /** The call leaves the pool; `end` is its last attempt's, when one reached the engine. */
  #forget(pending: PendingCall, end?: RelayEnd): void {
    pending.detach();
    this.#calls.delete(pending.call.callId);
    this.signals.callEnded(pending.call.programId, this.#options.clock.now(), {
      completed: end?.outcome === "completed",
      ...(pending.attempt === undefined ? {} : { engineId: pending.attempt.engineId }),
      ...(end?.facts === undefined ? {} : { facts: end.facts }),
      promptTokensEstimate: pending.call.promptTokens,
    });
    if (this.#calls.size === 0) for (const done of [...this.#idle]) done();
  }

  #retryAfter(): Record<string, string> {
    return { "Retry-After": String(this.#options.retryAfterSeconds) };
  }

  /** True when no engine has been healthy for the grace period. */
  #noHealthyEngineTooLong(now: number): boolean {
    this.#noteHealth(now);
    return now - this.#lastHealthyAt >= this.#options.noHealthyEngineGraceMs && !this.hasHealthyEngine();
  }

  #noteHealth(now: number): void {
    if (this.hasHealthyEngine()) this.#lastHealthyAt = now;
  }
}

/** Never read by anyone (the client is gone); 499 as nginx logs it. */
function clientClosedResponse(callId: string): Response {
  return callErrorResponse(499 as UnofficialStatusCode, "Client closed the request", callId, { code: "client_closed" });
}

function shuttingDownResponse(callId: string, headers: Record<string, string>): Response {
  return callErrorResponse(503, "The pool is shutting down", callId, { code: "shutting_down", headers });
}
