import type { HTTPException } from "hono/http-exception";
import { loadPerHealthyEngine, type PoolStatus } from "../protocol/pool-status.js";
import type { Dispatcher as HttpDispatcher } from "undici";
import type { HoldReason } from "../core/admission.js";
import type { Clock } from "../core/clock.js";
import type { DispatchSettings } from "../core/dispatch.js";
import type { EngineState } from "../core/engines.js";
import { PoolCore } from "../core/pool-core.js";
import type { ProgramQueue, QueuedCall } from "../core/queue.js";
import { READINESS_SOURCES } from "../core/tao/readiness.js";
import type { TaoPlacementStats } from "../core/tao/tao-placement.js";
import type { ProgramSignals } from "../core/tao/tool-signals.js";
import { type ChatCompletionRequest, requestedMaxTokens } from "../protocol/chat.js";
import type { ForwardFields } from "../protocol/forward.js";
import { estimatePromptTokens } from "../protocol/tokens.js";
import type { KvHint } from "../protocol/kv-hints.js";
import { KV_RETENTION_TAG_FIELD } from "../protocol/kv-retention.js";
import { type ContextInspection, type ContextRef, contextTag, RetentionPlanner } from "../core/kv/retention-planner.js";
import { KvRetentionRelay } from "./kv-retention-relay.js";
import { expectedHandoffMs, handoffFactsOf } from "./handoff-estimate.js";
import type { ToolEvent } from "../protocol/tool-events.js";
import { CALL_ERROR_MESSAGES, callError, callErrorResponse } from "./call-errors.js";
import type { EngineConfig } from "./config.js";
import { adapterFor } from "./engines/index.js";
import { type CallForms, type EngineRequestForm, formFor } from "./engine-request.js";
import type { EngineReading } from "./engine-monitor.js";
import type { CallOutcome, PoolMetrics, PoolStateSource } from "./metrics.js";
import { type EngineTarget, type RelayEnd, type RelayStart, relayToEngine } from "./relay.js";
import { type PlacementSettings, TaoConfig } from "./tao/config.js";
import { PlanLoop } from "./tao/plan-loop.js";
import { type CountingEngine, countingEngine, countTokensOn, type TokenCount } from "./token-count.js";
import type { CountTokensRequest } from "../protocol/messages.js";
import type { RoleDemandMeter, RoleEngineReadings } from "../core/roles/role-demand-meter.js";
import type { RoleEngineState, RoleSwitch } from "../core/roles/roles.js";
import type { RoleSwitchTarget } from "./role-control.js";
import type { ClientLink } from "./client-link.js";
import type { CallAnswer, DirectAnswer } from "./direct-answer.js";
import { AttemptAbort } from "./attempt-abort.js";
import { clientClosedResponse, type EngineSlot, type PendingCall, shuttingDownResponse } from "./pending-call.js";
import { SplitCalls } from "./split-call.js";
import type { SplitCallHost } from "./split-call-host.js";
import { ReleasingMap } from "../core/releasing-map.js";

/** A pending call's detach before it listens for its client. */
const NOT_LISTENING = (): void => undefined;

/** How long an engine may take to count a prompt before the pool says it could not. */
const TOKEN_COUNT_TIMEOUT_MS = 5_000;

/*
 * The pool's I/O around its core (core/pool-core.ts, the same object the simulator
 * drives): calls in from the HTTP front, relays out to the engines, retries, client
 * disconnects, shutdown and metrics. Whenever capacity may have appeared (a call
 * arrives, one finishes, engine readings change) it asks the core which calls go
 * where, and starts their relays. Scheduling rules live in core only.
 *
 * Retry: an attempt that fails before the engine's first byte is tried again, up to
 * `retries` more times, first directly on another engine that admits it (the failed
 * ones excluded; it was already chosen by priority), else back into the queue with
 * its original enqueue time, i.e. ahead of later calls of its level.
 *
 * Placement: "routing" (default) or "tao"; under "tao" plans are made off the request
 * path (tao/plan-loop.ts): the core plans when the loop asks, and pumps at every event.
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
  /** Measures split calls' prefill and decode demand for a role controller (role-control.ts); absent: nothing measured. */
  roleMeter?: RoleDemandMeter | undefined;
}

/** An engine's role as the operator endpoint shows it. */
export interface EngineRoleView {
  id: string;
  role: string;
  /** The role it drains toward (a drain under way). */
  switchingTo: string | undefined;
  /** The old role whose calls it still finishes (an overlapping switch under way). */
  finishingFrom: string | undefined;
  /** How it switches: overlap or drain. */
  switchMode: string;
  inFlight: number;
}

export interface CallSubmission {
  fields: ForwardFields;
  /** The call as the scheduler reads it, whatever its API (verify-forward.ts CallApiShape). */
  request: ChatCompletionRequest;
  /** The bodies an engine can be sent (adapters add the engine's fields); each attempt takes the one its engine serves. */
  forms: CallForms;
  /** Says when the client goes away (client-link.ts). */
  client: ClientLink;
  /**
   * Writes an engine's answer straight to the client where it is handed over (the pool's
   * Node listener), before the promise hops to submit()'s caller; the promise still
   * settles with the same answer.
   */
  takeAnswer?(answer: DirectAnswer): void;
}

/** What /health and tests can read. */
export interface EngineSnapshot extends EngineState {
  kind: string;
  /** KV capacity the pool plans with: configured, else stated by the engine's metrics, else the default. */
  kvCapacityTokens: number;
}

/** What the pool knows about one program for TAO (inspection). */
export interface ProgramInspection extends ProgramSignals {
  placement: PlacementSettings["policy"];
  /** Its threads' current contexts as the retention planner knows them (empty when it knows none). */
  kvContexts: ContextInspection[];
}

export class Dispatcher implements RoleSwitchTarget {
  readonly #options: DispatcherOptions;
  readonly #core: PoolCore;
  readonly #slots = new Map<string, EngineSlot>();
  readonly #calls = new ReleasingMap<string, PendingCall>();
  readonly #idle = new Set<() => void>();
  readonly #placement: PlacementSettings;
  readonly #planLoop: PlanLoop | undefined;
  /** Left-out programs TAO held in the queue at the last pump (a gauge). */
  #heldPrograms = 0;
  /** Why the last pump left calls waiting. */
  #held: HoldReason | undefined;
  #lastHealthyAt: number;
  #closed = false;
  readonly #models: ReadonlySet<string> | undefined;
  readonly #retention = new RetentionPlanner();
  readonly #retentionRelay: KvRetentionRelay;
  readonly #split: SplitCalls;

  constructor(options: DispatcherOptions) {
    this.#options = options;
    this.#models = options.models === undefined ? undefined : new Set(options.models);
    const { metrics } = options;
    this.#placement = options.placement ?? { policy: "routing", tao: TaoConfig.parse({}) };
    const tao = this.#placement.tao;
    this.#core = new PoolCore({
      settings: options.settings,
      engines: options.engines.map((engine) => ({
        id: engine.id,
        maxInFlight: engine.maxInFlight,
        maxDecodes: engine.maxDecodes,
        capacityTokens: engine.kvCapacityTokens,
        costModel: engine.decodeCost,
        role: engine.role,
        switchMode: engine.roleSwitch,
      })),
      placement: this.#placement.policy === "tao" ? { policy: "tao", settings: tao } : { policy: "routing" },
      signals: tao.tao,
      stopwatch: () => performance.now(),
      hooks: {
        onPrediction: (source) => metrics.readinessPrediction(source).inc(),
        onToolEvent: (type, outcome) => metrics.toolEvents.inc({ type, outcome }),
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
    for (const engine of options.engines) {
      const target: EngineTarget = { id: engine.id, url: engine.url, apiKey: engine.apiKey, adapter: adapterFor(engine.kind) };
      this.#slots.set(engine.id, { target, model: engine.model, nativeApis: new Set(engine.nativeApis), bootstrapPort: engine.bootstrapPort, kvLink: engine.kvLink });
    }
    this.#retentionRelay = new KvRetentionRelay({ engines: options.engines, http: options.http, metrics });
    this.#split = new SplitCalls(this.#splitHost());
    this.#lastHealthyAt = options.clock.now();
    if (this.#placement.policy === "tao") {
      this.#planLoop = new PlanLoop({
        minIntervalMs: tao.replanMinIntervalMs,
        periodMs: tao.planIntervalMs,
        now: () => this.#options.clock.now(),
        plan: () => this.#pumpAt(this.#options.clock.now(), true),
        tick: () => this.#periodicRound(),
      });
      this.#planLoop.start();
    }
    const core = this.#core;
    const source: PoolStateSource = {
      depthByLevel: () => core.queue.depthByLevel(this.#options.clock.now()),
      engineStates: () => core.engines,
      reservationsHeld: () => core.reservationsHeld,
      heldPrograms: () => this.#heldPrograms,
      readinessAccuracy: () => {
        const accuracy = core.signals.readiness.accuracy();
        return Object.fromEntries([...READINESS_SOURCES, "all" as const].map((key) => [key, accuracy[key]]));
      },
      cacheRetention: () => core.engines.map((state) => ({ engine: state.id, retention: core.signals.credits.retention(state.id) })),
      holdReason: () => (core.queue.size > 0 ? this.#held : undefined),
      engineRoles: () => core.roles.snapshot().map(({ id, role, switchingTo }) => ({ engine: id, role, switchingTo })),
      admissionProjections: () =>
        core.engines.map((state) => ({
          engine: state.id,
          kvTokens: core.kv.projectedKvTokens(state.id),
          stepMs: core.kv.projectedStepMs(state),
        })),
    };
    options.metrics.observe(source);
  }

  /** The program queue (inspection and tests). */
  get queue(): ProgramQueue {
    return this.#core.queue;
  }

  get placementPolicy(): PlacementSettings["policy"] {
    return this.#placement.policy;
  }

  /**
   * Queues a call. Throws (an OpenAI-shaped HTTPException) when it cannot be queued;
   * otherwise the promise settles with the response to send and never rejects.
   */
  submit(submission: CallSubmission): Promise<CallAnswer> {
    const { fields, request, forms, client, takeAnswer } = submission;
    const { metrics, clock } = this.#options;
    const now = clock.now();
    if (this.#closed) throw this.#unavailable(fields, "shutting_down", "The pool is shutting down");
    if (this.#core.queue.size >= this.#options.maxQueuedCalls) throw this.#unavailable(fields, "queue_full", "The pool queue is full");
    if (this.#noHealthyEngineTooLong(now)) throw this.#unavailable(fields, "no_healthy_engine", "No healthy engine in this pool");
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

    let resolve!: (answer: CallAnswer) => void;
    const response = new Promise<CallAnswer>((settle) => {
      resolve = settle;
    });
    if (client.gone) {
      metrics.cancelled.inc({ stage: "queued" });
      resolve(clientClosedResponse(call.callId));
      return response;
    }
    const context: ContextRef = { programId: call.programId, threadId: call.threadId, generation: fields.generation };
    try {
      this.#core.enqueue(call, now, this.#prefixKept(context, call.affinityEngine, now));
    } catch (error) {
      // The core validates the call (e.g. a value that overflowed to Infinity): the edge sent bad figures.
      metrics.reject("invalid_request");
      throw callError(400, `Invalid forwarded call: ${error instanceof Error ? error.message : String(error)}`, call.callId, {
        code: "invalid_forward_headers",
      });
    }
    // A newer generation than its thread's: the context it replaced may be evicted first.
    this.#retentionRelay.send(this.#retention.callArrived(context, now));
    const pending: PendingCall = {
      call,
      context,
      forms,
      stream: request.stream === true,
      client,
      stage: "queued",
      level: 0,
      retriesLeft: this.#options.retries,
      failedEngines: new Set(),
      resolve,
      detach: NOT_LISTENING,
    };
    if (takeAnswer !== undefined) pending.takeAnswer = takeAnswer;
    this.#calls.set(call.callId, pending);
    pending.detach = client.onGone(() => this.#clientGone(pending));
    this.pump();
    if (pending.stage === "queued") metrics.callsHeld.inc({ reason: this.#held ?? "count" });
    return response;
  }

  /** A 503 for a call the pool cannot take now, counted. */
  #unavailable(fields: ForwardFields, reason: "queue_full" | "no_healthy_engine" | "shutting_down", message: string): HTTPException {
    this.#options.metrics.reject(reason);
    return callError(503, message, fields.call, { code: reason, headers: this.#retryAfter() });
  }

  /**
   * Applies a batch of the client's tool events (forwarded by the edge, verified by the
   * caller); `edgeTs` is the batch's signed timestamp. Returns how many were applied.
   */
  toolEvents(programId: string, events: readonly ToolEvent[], edgeTs: number): number {
    const now = this.#options.clock.now();
    const applied = this.#core.toolEvents(programId, events, now, edgeTs);
    // A program ready soon may be worth a reservation now, not at the next round.
    if (applied > 0) this.#planLoop?.request();
    // The prediction moved: its contexts are kept until the new expected return.
    if (applied > 0) this.#keepThroughToolWait(programId, now);
    return applied;
  }

  /**
   * Applies a batch of the edge's KV hints about a program (verified by the caller).
   * Returns how many were applied.
   */
  kvHints(programId: string, hints: readonly KvHint[]): number {
    let applied = 0;
    for (const hint of hints) {
      this.#options.metrics.kvHints.inc({ type: hint.type });
      if (hint.type === "thread_ended") {
        // One branch is over: its context goes first; the program and its other threads go on as they were.
        this.#retentionRelay.send(this.#retention.threadEnded(programId, hint.thread, hint.generation));
      } else {
        // Nothing of the program will come back: TAO's reservation and predictions for it go, and its KV first.
        this.#core.programEnded(programId);
        this.#retentionRelay.send(this.#retention.programEnded(programId));
      }
      applied += 1;
    }
    return applied;
  }

  /** What the pool knows about a program for TAO; undefined when nothing. */
  inspectProgram(programId: string): ProgramInspection | undefined {
    const now = this.#options.clock.now();
    const signals = this.#core.signals.inspect(programId, now);
    const kvContexts = this.#retention.inspect(programId, now);
    if (signals === undefined && kvContexts === undefined) return undefined;
    const known = signals ?? { programId, live: 0, contextTokens: 0, readiness: { status: "unknown" as const }, credits: {} };
    return { ...known, placement: this.#placement.policy, kvContexts: kvContexts ?? [] };
  }

  /** The TAO placement's figures; undefined under "routing". */
  taoStats(): TaoPlacementStats | undefined {
    return this.#core.taoStats();
  }

  /** Applies the monitor's readings, then dispatches into any capacity they opened. */
  updateEngines(readings: readonly EngineReading[]): void {
    const now = this.#options.clock.now();
    this.#noteHealth(now);
    for (const reading of readings) if (!reading.healthy) this.#retention.engineLost(reading.id);
    this.#core.engineReadings(readings, now);
    this.#retention.prune(now);
    this.pump();
  }

  /** Hands queued calls to engines while any can take one. */
  pump(): void {
    this.#pumpAt(this.#options.clock.now(), false);
  }

  #pumpAt(now: number, plan: boolean): void {
    if (this.#closed) return;
    const { metrics } = this.#options;
    if (this.#noHealthyEngineTooLong(now)) {
      this.#failQueued(503, "No healthy engine in this pool", "no_healthy_engine");
      return;
    }
    // Prefilled calls first: their KV is pinned on a prefill engine while they wait.
    this.#split.retryHeldDecodes();
    const round = this.#core.pump(now, { plan });
    this.#held = round.held;
    if (round.held !== undefined) metrics.holdRounds.inc({ reason: round.held });
    this.#heldPrograms = round.heldPrograms;
    if (round.needsPlan) this.#planLoop?.request();
    for (const dispatch of round.dispatches) {
      const pending = this.#calls.get(dispatch.call.callId);
      const slot = this.#slots.get(dispatch.engineId);
      if (pending === undefined || slot === undefined) {
        // Cannot happen (every queued call is tracked); give the slot back rather than leak it.
        this.#core.attemptEnded(dispatch.call.callId, { serviceMs: 0 }, now);
        continue;
      }
      metrics.engine(dispatch.engineId).dispatched(dispatch.reason).inc();
      if (dispatch.promoted) metrics.promotions.inc();
      if (pending.failedEngines.size === 0) metrics.queueWait.observe((now - pending.call.enqueuedAt) / 1000);
      pending.level = dispatch.level;
      this.#start(pending, dispatch.engineId, slot, now);
    }
  }

  /** count_tokens by an engine's tokenizer (token-count.ts): not queued, it generates nothing. */
  countTokens(request: CountTokensRequest): Promise<TokenCount> {
    const engines: CountingEngine[] = [];
    for (const state of this.#core.engines) {
      const slot = this.#slots.get(state.id);
      if (slot !== undefined) engines.push({ ...slot, healthy: state.healthy });
    }
    const engine = countingEngine(engines);
    if (engine === undefined) return Promise.resolve({ ok: false, reason: "no healthy engine of this pool counts tokens" });
    return countTokensOn(engine, request, { http: this.#options.http, timeoutMs: TOKEN_COUNT_TIMEOUT_MS });
  }

  /** The engines as the role controller reads them. */
  roleStates(): readonly RoleEngineState[] {
    return this.#core.roleStates();
  }

  /** What the demand meter cannot see: the decode engines' KV and the calls waiting for prefill (issue 13). */
  roleReadings(): RoleEngineReadings {
    return this.#core.roleReadings();
  }

  /**
   * Starts a role switch in the engine's mode: overlap (it takes the new role's work now,
   * its old role's calls finish where they are) or drain (nothing new of either role,
   * then it flips); false when it cannot switch now.
   */
  startRoleSwitch(roleSwitch: RoleSwitch): boolean {
    const core = this.#core;
    const calls = core.callsOn(roleSwitch.engineId);
    if (this.#closed || !core.startRoleSwitch(roleSwitch, this.#options.clock.now())) return false;
    const mode = core.roles.switchMode(roleSwitch.engineId) ?? "drain";
    this.#options.metrics.roleSwitchesStarted.inc({ from: roleSwitch.from, to: roleSwitch.to, mode });
    const what =
      mode === "overlap"
        ? `takes ${roleSwitch.to} work now, ${calls[roleSwitch.from] ?? 0} ${roleSwitch.from} call(s) finish there`
        : `draining ${core.engine(roleSwitch.engineId)?.inFlight ?? 0} call(s)`;
    console.info(`agentix pool: engine ${roleSwitch.engineId} switching ${roleSwitch.from} -> ${roleSwitch.to} (${mode}): ${what} (${roleSwitch.reason})`);
    this.#noteRoleSwitches();
    // A switch that finished at once may have opened room (a new decode or prefill engine).
    this.pump();
    return true;
  }

  /** Every engine's role now (the operator endpoint). */
  engineRoles(): EngineRoleView[] {
    return this.#core.roles.snapshot().map(({ id, role, switchingTo, finishingFrom, mode }) => ({ id, role, switchingTo, finishingFrom, switchMode: mode, inFlight: this.#core.engine(id)?.inFlight ?? 0 }));
  }

  engineSnapshots(): EngineSnapshot[] {
    return this.#core.engines.map((state) => ({
      ...state,
      kind: this.#slots.get(state.id)?.target.adapter.kind ?? "unknown",
      kvCapacityTokens: this.#core.kvCapacityTokens(state.id),
    }));
  }

  /** The pool's load and health for the edge (`GET /v1/status`). */
  status(): PoolStatus {
    const now = this.#options.clock.now();
    const core = this.#core;
    const healthy = core.engines.filter((state) => state.healthy);
    let capacity = 0;
    let free = 0;
    for (const state of healthy) {
      const engineCapacity = core.kvCapacityTokens(state.id);
      capacity += engineCapacity;
      free += Math.max(0, engineCapacity - core.kv.projectedKvTokens(state.id));
    }
    return {
      object: "pool.status",
      status: healthy.length > 0 ? "ok" : "degraded",
      models: this.#models === undefined ? null : [...this.#models],
      engines: { total: core.engines.length, healthy: healthy.length },
      queue: { queued: core.queue.size, running: this.runningCount, by_level: core.queue.depthByLevel(now) },
      kv: { capacity_tokens: Math.round(capacity), free_tokens: Math.round(free) },
      at: Math.max(0, Math.round(now)),
    };
  }

  get queuedCount(): number {
    return this.#core.queue.size;
  }

  /** Prefilled split calls waiting for a decode engine to admit them. */
  get heldDecodes(): number {
    return this.#split.heldDecodes;
  }

  get runningCount(): number {
    let running = 0;
    for (const pending of this.#calls.values()) if (pending.stage === "running") running += 1;
    return running;
  }

  /** A keep of the context is in force on the hint's engine, and that engine honours keeps: its turnover does not evict the prefix. */
  #prefixKept(context: ContextRef, engineId: string | undefined, now: number): boolean {
    return engineId !== undefined && this.#retentionRelay.takesHints(engineId) && this.#retention.keeps(context, engineId, now);
  }

  /** Calls queued and running per healthy engine: what every call's answer tells the edge (x-agentix-pool-load). */
  loadPerHealthyEngine(): number {
    let healthy = 0;
    for (const state of this.#core.engines) if (state.healthy) healthy += 1;
    return loadPerHealthyEngine(this.queuedCount, this.runningCount, healthy);
  }

  hasHealthyEngine(): boolean {
    return this.#core.engines.some((state) => state.healthy);
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
      // Held decodes are answered as shutting down (the split flow sees the pool closed).
      this.#split.retryHeldDecodes();
      for (const pending of this.#calls.values()) pending.attempt?.controller.abort(new Error("pool shutting down"));
    }
    await this.#retentionRelay.settled();
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

  /** TAO's periodic round: plan while there is anything to plan for; otherwise just pump. */
  #periodicRound(): void {
    if (this.#closed) return;
    if (this.#core.hasPlanningWork()) this.#planLoop?.planNow();
    else this.pump();
  }

  /** What the split-call flow uses of this dispatcher (split-call-host.ts). */
  #splitHost(): SplitCallHost {
    const options = this.#options;
    return {
      core: this.#core,
      clock: options.clock,
      http: options.http,
      metrics: options.metrics,
      roleMeter: options.roleMeter,
      closed: () => this.#closed,
      slot: (engineId) => this.#slots.get(engineId),
      holds: (callId) => this.#calls.has(callId),
      bodyFor: (pending, slot, form) => this.#bodyFor(pending, slot, form),
      heldOn: (context, engineId) => this.#retention.heldOn(context, engineId),
      prefillHandedOff: (pending, prefillId, decodeId) => this.#prefillHandedOff(pending, prefillId, decodeId),
      release: (pending, engineId, outcome, end) => this.#release(pending, engineId, outcome, end),
      finish: (pending, response) => this.#finish(pending, response),
      forget: (pending, end) => this.#forget(pending, end),
      attemptStarted: (pending, engineId, start, form) => this.#attemptStarted(pending, engineId, start, form),
      start: (pending, engineId, slot, now) => this.#start(pending, engineId, slot, now),
      requeue: (pending) => this.#requeue(pending),
      retryAfter: () => this.#retryAfter(),
      engineDown: (engineId) => options.onEngineDown?.(engineId),
      noteRoleSwitches: () => this.#noteRoleSwitches(),
      pump: () => this.pump(),
    };
  }

  /** A split call's hand-off: the planner keeps the prefill copy through the transfer and decode the pool expects (handoff-estimate.ts). */
  #prefillHandedOff(pending: PendingCall, prefillId: string, decodeId: string): void {
    const facts = handoffFactsOf(this.#core, pending.call, decodeId, this.#slots.get(prefillId)?.kvLink);
    this.#retentionRelay.send(this.#retention.prefillHandedOff(pending.context, prefillId, expectedHandoffMs(facts), this.#options.clock.now()));
  }

  #start(pending: PendingCall, engineId: string, slot: EngineSlot, now: number): void {
    // The engine (a split call's prefill engine) holds the call's context from now; its #release ends that.
    this.#retentionRelay.send(this.#retention.callStarted(pending.context, engineId, now));
    if (this.#split.start(pending, engineId, slot, now)) return;
    const abort = new AttemptAbort();
    pending.stage = "running";
    pending.attempt = { engineId, controller: abort };
    const core = this.#core;
    const dispatcher = this;
    const form = formFor(pending.forms, slot.nativeApis);
    const body = this.#bodyFor(pending, slot, form);
    let handedOver = false;
    relayToEngine({
      engine: slot.target,
      callId: pending.call.callId,
      api: form.api,
      path: form.path,
      body,
      stream: pending.stream,
      queueMs: now - pending.call.enqueuedAt,
      dispatchedAt: now,
      signal: abort,
      http: this.#options.http,
      clock: this.#options.clock,
      serviceReadsFacts: core.serviceReadsUsage(engineId),
      // Methods, not arrow properties: the pool's tsx renames each named closure it makes (relay-attempt.ts).
      serviceOf(wallMs, facts) {
        return core.serviceMs(engineId, wallMs, facts?.usage);
      },
      onEnd(end) {
        dispatcher.#attemptEnded(pending, engineId, end);
      },
      // The slot, metrics, signals and the next call's start follow a whole answer's writing.
      endAfterAnswer: true,
      onWholeAnswer(start) {
        // Only an answer written straight as the engine gave it (not one translated first).
        if (pending.takeAnswer === undefined || form.answer !== undefined) return;
        handedOver = true;
        dispatcher.#attemptStarted(pending, engineId, start, form);
      },
    }).then(
      (start) => {
        if (!handedOver) this.#attemptStarted(pending, engineId, start, form);
      },
      (error: unknown) => {
        // relayToEngine handles its own failures; this is a bug guard, not a path.
        console.error(`agentix pool: call ${pending.call.callId}: relay to engine ${engineId} threw`, error);
        if (pending.stage !== "done") this.#release(pending, engineId, "failed", { serviceMs: 0 });
        this.#finish(pending, callErrorResponse(500, CALL_ERROR_MESSAGES.internal_error, pending.call.callId, { code: "internal_error" }));
        this.pump();
      },
    );
  }

  /**
   * The body an engine gets for the call in `form`: its adapter's fields (model, priority,
   * usage options), and for an engine that takes retention hints the context its KV belongs to.
   */
  #bodyFor(pending: PendingCall, slot: EngineSlot, form: EngineRequestForm): Record<string, unknown> {
    const body = slot.target.adapter.buildBody(form.body, { api: form.api, level: pending.level, levels: this.#options.settings.queue.levels, model: slot.model });
    const tag = this.#retentionRelay.takesHints(slot.target.id) ? contextTag(pending.context) : undefined;
    if (tag !== undefined) body[KV_RETENTION_TAG_FIELD] = tag;
    return body;
  }

  /** Role switches completed since the last look (the engine drained, or its old role's last call left): logged once each and counted. */
  #noteRoleSwitches(): void {
    for (const done of this.#core.takeFinishedRoleSwitches()) {
      this.#options.metrics.roleSwitches.inc({ from: done.from, to: done.to, mode: done.mode });
      const how = done.mode === "overlap" ? `its last ${done.from} call left` : "drained";
      console.info(`agentix pool: engine ${done.engineId} switched ${done.from} -> ${done.to} (${done.mode}: ${how}; ${done.reason})`);
    }
  }

  #attemptEnded(pending: PendingCall, engine: string, end: RelayEnd): void {
    const { metrics } = this.#options;
    const usage = end.facts?.usage;
    this.#release(pending, engine, end.outcome, {
      serviceMs: end.serviceMs,
      ...(end.outcome === "completed" && usage !== undefined ? { outputTokens: usage.completionTokens } : {}),
    });
    const meters = metrics.engine(engine);
    meters.serviceSeconds.observe(end.wallMs / 1000);
    if (end.outcome === "completed") (usage ? meters.usageReported : meters.usageEstimated).inc();
    if (usage !== undefined) {
      meters.promptTokens[end.outcome].inc(usage.promptTokens);
      meters.completionTokens[end.outcome].inc(usage.completionTokens);
    }
    if (end.outcome === "aborted" || end.outcome === "failed") {
      // The engine's work for a call nobody received in full: on record here, whatever the edge could settle.
      const work = usage === undefined ? "no usage reported" : `engine reported ${usage.promptTokens} prompt + ${usage.completionTokens} completion tokens`;
      console.info(`agentix pool: call ${pending.call.callId} ${end.outcome} on engine ${engine} after ${end.wallMs} ms; ${work}`);
    }
    pending.stage = "done";
    this.#forget(pending, end);
    this.pump();
  }

  #attemptStarted(pending: PendingCall, engineId: string, start: RelayStart, form: EngineRequestForm): void {
    if (start.kind === "response") {
      // A whole answer whose attempt ends once it is written: nothing runs for the call any more (the pool's load, a client gone now).
      if (start.endPending === true) pending.stage = "done";
      const callId = pending.call.callId;
      if (form.answer === undefined) {
        if (start.direct !== undefined) pending.takeAnswer?.(start.direct);
        return pending.resolve(start.direct ?? start.response);
      }
      form.answer(start.response).then(pending.resolve, (error: unknown) => {
        // The translations read what they can and pass the rest; this is a bug guard, not a path.
        console.error(`agentix pool: call ${callId}: the answer from engine ${engineId} could not be put in the call's API`, error);
        pending.resolve(callErrorResponse(502, CALL_ERROR_MESSAGES.engine_response_error, callId, { code: "engine_response_error" }));
      });
      return;
    }
    const callId = pending.call.callId;
    if (start.kind === "aborted") {
      this.#finish(pending, this.#closed ? shuttingDownResponse(callId, this.#retryAfter()) : clientClosedResponse(callId));
      return;
    }
    // Failed before the first byte: the engine did no work for the call, nothing is charged.
    console.warn(`agentix pool: call ${callId}: attempt failed before the first byte: ${start.reason}`);
    pending.failedEngines.add(engineId);
    if (start.connectionFailed) {
      this.#core.engineDown(engineId);
      this.#options.onEngineDown?.(engineId);
    }
    this.#release(pending, engineId, "engine_error", { serviceMs: 0 });
    if (this.#closed) {
      this.#finish(pending, shuttingDownResponse(callId, this.#retryAfter()));
    } else if (pending.client.gone) {
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

  /** The attempt left the engine: its slot back in the core (once), counted by outcome. */
  #release(pending: PendingCall, engineId: string, outcome: CallOutcome, end: { serviceMs: number; outputTokens?: number }): void {
    const now = this.#options.clock.now();
    this.#core.attemptEnded(pending.call.callId, end, now);
    this.#retention.callEnded(pending.context, now);
    this.#options.metrics.engine(engineId).calls[outcome].inc();
    this.#noteRoleSwitches();
  }

  #retry(pending: PendingCall): void {
    const { clock, metrics } = this.#options;
    const now = clock.now();
    const dispatch = this.#core.route(pending.call, pending.failedEngines, now);
    const slot = dispatch && this.#slots.get(dispatch.engineId);
    if (dispatch && slot) {
      metrics.engine(dispatch.engineId).dispatched(dispatch.reason).inc();
      this.#start(pending, dispatch.engineId, slot, now);
      return;
    }
    // No other engine free now: wait in the queue at the call's original place.
    this.#requeue(pending);
  }

  #requeue(pending: PendingCall): void {
    pending.stage = "queued";
    pending.attempt = undefined;
    this.#core.requeue(pending.call);
  }

  #clientGone(pending: PendingCall): void {
    const { metrics } = this.#options;
    if (pending.stage === "queued") {
      this.#core.dropQueued(pending.call.callId);
      metrics.cancelled.inc({ stage: "queued" });
      this.#finish(pending, clientClosedResponse(pending.call.callId));
    } else if (this.#split.leaveHeldDecode(pending)) {
      // Prefilled, waiting for a decode engine: nothing runs to abort, so it is answered and gone now.
      metrics.cancelled.inc({ stage: "held_decode" });
    } else if (pending.stage === "running") {
      metrics.cancelled.inc({ stage: "running" });
      // The relay sees the abort, ends the attempt, and #attemptEnded frees the slot.
      pending.attempt?.controller.abort(new Error("client disconnected"));
    }
  }

  #failQueued(status: 503, message: string, code: "no_healthy_engine" | "shutting_down"): void {
    for (const pending of [...this.#calls.values()]) {
      if (pending.stage !== "queued") continue;
      this.#core.dropQueued(pending.call.callId);
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
    this.#options.roleMeter?.forget(pending.call.callId);
    this.#calls.delete(pending.call.callId);
    const now = this.#options.clock.now();
    this.#core.callLeft(
      pending.call.programId,
      {
        completed: end?.outcome === "completed",
        ...(pending.attempt === undefined ? {} : { engineId: pending.attempt.engineId }),
        ...(end?.facts === undefined ? {} : { facts: end.facts }),
        promptTokensEstimate: pending.call.promptTokens,
      },
      now,
    );
    // The program's last call answered: it is in a tool wait, and its contexts are kept through it.
    this.#keepThroughToolWait(pending.call.programId, now);
    if (this.#calls.size === 0) for (const done of [...this.#idle]) done();
  }

  /** Keeps the program's idle contexts until TAO's predicted return, when it predicts one. */
  #keepThroughToolWait(programId: string, now: number): void {
    const prediction = this.#core.signals.readiness.predictReadyAt(programId, now);
    if (prediction.status !== "pending" || prediction.readyAt === undefined) return;
    this.#retentionRelay.send(this.#retention.toolWait(programId, prediction.readyAt, now));
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
