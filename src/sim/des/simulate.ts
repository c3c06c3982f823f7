/*
 * Discrete-event simulation of an Agentix pool: programs issue calls, the pool core
 * (src/core/pool-core.ts, the object src/pool/dispatcher.ts drives on real time)
 * queues, admits and places them, and EngineModel instances (src/sim/engine-model.ts)
 * time them. Nothing here decides an order or a duration: the pool core and the
 * engine model do.
 *
 * What stands in for the other parts of the system, with zero network latency:
 * - the edge: per program, the service values of src/core/service.ts (a call records
 *   callStartValue when it is issued; completeCall on completion), the wait the pool
 *   reported (its queue time) added up, and the engine that served it last;
 * - the pool's I/O: PoolCore's pump whenever capacity may have appeared, its engine
 *   readings from a metrics scrape every metricsIntervalMs, attemptEnded and callLeft
 *   when a call finishes (service = dispatch → finish, as the relay measures it);
 * - the engines: steps back to back while busy, as src/sim/engine-driver.ts runs
 *   them: requests submitted during a step join the next one.
 *
 * Events: program arrival, call ready (dependencies done + gapBeforeMs), engine kick
 * (an idle engine got work), engine step end, pool pump (coalesced per instant),
 * metrics scrape, and TAO wake-up. Ordered by (time, scheduling order): the same
 * inputs give the same result.
 *
 * Placement policies: "cache-aware" routes with the core's SGLang-style rule over a
 * RoutedPrefixIndex the simulator keeps as the router would (each call's prompt is
 * rendered when it is issued, and inserted in the tree of the engine it goes to);
 * "agentix-tao" is the core's TAO placement, with the clients' tool events and the
 * planning cadence played by TaoSimulation (tao-simulation.ts).
 */

import type { Dispatch, ServiceMeasure } from "../../core/dispatch.js";
import { POOL_DEFAULTS } from "../pool-defaults.js";
import { type EngineState, metricsSaturated } from "../../core/engines.js";
import { PoolCore, type PoolPlacement } from "../../core/pool-core.js";
import type { TaoPlan } from "../../core/tao/planner.js";
import { DEFAULT_ROUTED_PREFIX_SETTINGS, RoutedPrefixIndex, type RoutedPrefixSettings } from "../../core/prefix-index.js";
import type { QueuedCall } from "../../core/queue.js";
import type { PrefixMatcher, RouteReason } from "../../core/routing.js";
import { callStartValue, completeCall, NO_SERVICE, type ProgramService } from "../../core/service.js";
import { type EngineEvent, EngineModel, EngineRequestError, type FinishedEvent } from "../engine-model.js";
import { DEFAULT_PROFILE, decodeCostOf, type EngineProfileName, resolveProfile } from "../profiles.js";
import type { AgentKind } from "../workload/kinds.js";
import { type CallSpec, type ProgramSpec, promptTokenCount } from "../workload/program-spec.js";
import { EventQueue } from "./event-queue.js";
import { firstSampleAt, type MeasurementWindow, type RunSample, type StepFigures, StepMeter, validateWindow } from "./observer.js";
import { type PolicyName, type PolicySetup, isPolicyName, policySetup } from "./policies.js";
import { ProgramPrompts, type RenderedCall } from "./program-prompts.js";
import { programWorkMs } from "./remaining-work.js";
import { taoPlacementSettings, TaoSimulation, type TaoSimulationOptions, type TaoRunStats } from "./tao-simulation.js";

export interface SimulationConfig {
  /** From generatePrograms(workload, { seed, count }). */
  programs: readonly ProgramSpec[];
  policy: PolicyName;
  /** Number of engines, e.g. 4. */
  engines: number;
  /** Default llama-3.1-8b-h100. */
  engineProfile?: EngineProfileName;
  /** Pool buffer per engine for the queueing policies; default the pool config's (64). Ignored by the direct policies. */
  maxInFlightPerEngine?: number;
  /**
   * Admission's step-time target as a multiple of the profile's decode floor, for the
   * policies with admission; default the core's (no step-time limit). Ignored by the others.
   */
  stepTargetFactor?: number;
  /** What a call's service counts (the pool's scheduling.service); default the core's ("work"). */
  service?: ServiceMeasure;
  /**
   * Tenants whose client opens a new program for every call (no program header, a
   * fresh ID each time): the pool sees each call as a one-call program with no service,
   * wait or engine affinity. Records stay per simulated program. Not with agentix-tao.
   */
  churnTenants?: readonly string[];
  /** Stop (truncate) after this much virtual time. */
  maxSimMs?: number;
  /** Called when another 1 % of the programs finished (or of maxSimMs passed), and once at the end. */
  onProgress?: (p: { simMs: number; finishedPrograms: number; totalPrograms: number }) => void;
  /**
   * Tenant plan weights for the queue's fair share (x-agentix-weight); default 1. Not
   * the workload file's tenant `weight`, which is a share of the traffic.
   */
  tenantWeights?: Readonly<Record<string, number>>;
  /** Period of the engine metrics scrape (waiting, KV use); default the pool config's (500 ms); 0 reads them live at every dispatch. */
  metricsIntervalMs?: number;
  /**
   * Period at which an engine whose scraped metrics are over the saturation limits is
   * re-read, as the pool's engine monitor does; default the pool config's (50 ms).
   */
  saturatedMetricsIntervalMs?: number;
  /** Also return one record per call (dispatch order, timings); off by default (memory). */
  recordCalls?: boolean;
  /** "agentix-tao" only: TAO placement knobs and the simulated clients' tool events (tao-simulation.ts). */
  tao?: TaoSimulationOptions;
  /** "cache-aware" only: the router's prefix trees; default the core's (SGLang's size cap). */
  prefixTree?: RoutedPrefixSettings;
  /**
   * Measurement window (steady-state benchmark): each engine's step figures are also
   * accumulated over the part of each step inside it (EngineRecord.window).
   */
  window?: MeasurementWindow;
  /** Sample the pool's state (RunSample) every this many ms, on a grid through window.startMs (else through 0). */
  sampleEveryMs?: number;
  /**
   * End the run as soon as these programs have all finished (a steady-state run need
   * not drain the programs that arrived after its window). Unknown ids are errors.
   */
  endWhenFinished?: readonly string[];
}

export interface ProgramRecord {
  programId: string;
  kind: AgentKind;
  tenantId?: string;
  arrivalMs: number;
  /** NaN if unfinished (truncated). */
  finishMs: number;
  /** Calls completed. */
  calls: number;
  /** Calls the program has in all. */
  plannedCalls: number;
  generatedTokens: number;
  promptTokens: number;
  cachedTokens: number;
  /**
   * Total time its calls waited: pool queue plus engine waiting. Engine waiting is
   * measured up to the start of the step that completed the call's prefill (exact
   * for a prefill of one chunk; a multi-chunk prefill counts its earlier chunks).
   */
  queueMs: number;
  /** The pool-queue part alone: what the pool reports and the edge adds to the program's wait. */
  poolQueueMs: number;
  /** PLAS total: sum of call service (dispatch → finish on the engine, as the pool's relay measures it). */
  serviceMs: number;
  /** ATLAS value at the end. */
  criticalPathMs: number;
  preemptions: number;
}

export interface EngineRecord {
  engineId: string;
  busyMs: number;
  prefixCacheQueries: number;
  prefixCacheHits: number;
  preemptions: number;
  promptTokens: number;
  generationTokens: number;
  steps: number;
  /** Σ batch size × step time over the run (÷ busyMs: time-weighted mean batch). */
  batchMs: number;
  /** Σ KV use × step time over the run (÷ run span: time-weighted mean KV use, idle as 0). */
  kvMs: number;
  /** Highest KV use any step started with (0..1). */
  kvMax: number;
  /** Largest batch of any step. */
  batchMax: number;
  /** With SimulationConfig.window: the same figures (and preemptions) inside it. */
  window?: StepFigures;
}

export interface CallRecord {
  programId: string;
  callId: number;
  thread: string;
  readyMs: number;
  /** NaN while queued at the end of a truncated run. */
  dispatchMs: number;
  /** NaN if unfinished. */
  finishMs: number;
  engineId: string | undefined;
  /** Why the pool chose that engine; undefined while never dispatched. */
  reason: RouteReason | undefined;
  /** The pool's level at dispatch (after any promotion). */
  level: number;
  promoted: boolean;
  /** ATLAS value the call recorded when issued. */
  startValueMs: number;
  promptTokens: number;
  cachedTokens: number;
  outputTokens: number;
  /** When its first output token was generated (the engine's timing); NaN if it never was. TTFT = firstTokenMs - readyMs. */
  firstTokenMs: number;
}

export interface SimulationResult {
  policy: PolicyName;
  engines: EngineRecord[];
  /** One per input program, in input order (programs that had not arrived yet included, with finishMs NaN). */
  programs: ProgramRecord[];
  /** When the last program finished, or maxSimMs when truncated. */
  simEndMs: number;
  wallMs: number;
  events: number;
  truncated: boolean;
  /** Only with recordCalls: in dispatch order, then calls never dispatched. */
  calls?: CallRecord[];
  /** "agentix-tao" only: what the planner did and how the readiness predictor fared. */
  tao?: TaoRunStats;
  /** Why the run stopped: every program finished, the endWhenFinished programs finished, or maxSimMs. */
  endedBy: "all-finished" | "watched-finished" | "time-cap";
  /** With sampleEveryMs: the pool's state over time. */
  samples?: RunSample[];
}


/** Tenant of programs that name none. */
export const DEFAULT_SIM_TENANT = "ten_sim";

const ARRIVAL = 0;
const READY = 1;
const KICK = 2;
const STEP_END = 3;
const PUMP = 4;
const SCRAPE = 5;
const WAKE = 6;
const RESCRAPE = 7;
const SAMPLE = 8;

type SimEvent =
  | { kind: typeof ARRIVAL; program: ProgramRun }
  | { kind: typeof READY; call: CallRun }
  | { kind: typeof KICK | typeof STEP_END | typeof RESCRAPE; engine: SimEngine }
  | { kind: typeof PUMP | typeof SCRAPE | typeof WAKE | typeof SAMPLE };

interface SimEngine {
  readonly model: EngineModel;
  readonly state: EngineState;
  /** A step is running or a kick is scheduled. */
  stepping: boolean;
  stepStartMs: number;
  stepEndMs: number;
  /** A re-read of its metrics alone is scheduled (its last ones said saturated). */
  rescrapePending: boolean;
  readonly meter: StepMeter;
  /** Batch size and KV use of the step running now (for cutting it at the end of a run). */
  stepBatch: number;
  stepKv: number;
}

interface ProgramRun {
  readonly spec: ProgramSpec;
  readonly record: ProgramRecord;
  readonly tenantId: string;
  readonly weight: number;
  /** Its client opens a new program for every call (SimulationConfig.churnTenants). */
  readonly churns: boolean;
  service: ProgramService;
  /** The edge's waitMs: pool queue time of completed calls. */
  waitMs: number;
  affinity: string | undefined;
  depsLeft: Int32Array | undefined;
  dependents: number[][] | undefined;
  callsLeft: number;
  prompts: ProgramPrompts | undefined;
  /** Oracle only. */
  work: Float64Array | undefined;
  remainingMs: number;
}

interface CallRun {
  readonly program: ProgramRun;
  readonly spec: CallSpec;
  readonly key: string;
  readonly readyMs: number;
  /** ATLAS value recorded when the call is issued. */
  startValueMs: number;
  dispatchMs: number;
  engine: SimEngine | undefined;
  level: number;
  promoted: boolean;
  /** Engine submit → start of the step that completed the prefill. */
  engineWaitMs: number;
  record: CallRecord | undefined;
  /** Rendered when issued for cache-aware routing (the router reads the prompt), else at dispatch. */
  rendered: RenderedCall | undefined;
}

function validateConfig(config: SimulationConfig): void {
  if (!isPolicyName(config.policy)) throw new RangeError(`unknown policy "${String(config.policy)}"`);
  if (!(Number.isInteger(config.engines) && config.engines >= 1)) throw new RangeError(`engines must be an integer >= 1, got ${config.engines}`);
  if (config.maxSimMs !== undefined && !(config.maxSimMs > 0)) throw new RangeError(`maxSimMs must be > 0, got ${config.maxSimMs}`);
  const interval = config.metricsIntervalMs;
  if (interval !== undefined && !(Number.isFinite(interval) && interval >= 0)) {
    throw new RangeError(`metricsIntervalMs must be a finite number >= 0, got ${interval}`);
  }
  const saturatedInterval = config.saturatedMetricsIntervalMs;
  if (saturatedInterval !== undefined && !(Number.isFinite(saturatedInterval) && saturatedInterval > 0)) {
    throw new RangeError(`saturatedMetricsIntervalMs must be a finite number > 0, got ${saturatedInterval}`);
  }
  if (config.window !== undefined) validateWindow(config.window);
  if (config.sampleEveryMs !== undefined) firstSampleAt(0, config.sampleEveryMs);
  for (const [tenant, weight] of Object.entries(config.tenantWeights ?? {})) {
    if (!(Number.isFinite(weight) && weight > 0)) throw new RangeError(`weight of tenant ${tenant} must be > 0, got ${weight}`);
  }
  const ids = new Set<string>();
  for (const program of config.programs) {
    if (ids.has(program.programId)) throw new RangeError(`duplicate program id ${program.programId}`);
    ids.add(program.programId);
    if (!Number.isFinite(program.arrivalMs) || program.arrivalMs < 0) {
      throw new RangeError(`program ${program.programId}: arrivalMs must be a finite number >= 0`);
    }
    program.calls.forEach((call, i) => {
      if (call.callId !== i) throw new RangeError(`program ${program.programId}: call ${i} has callId ${call.callId}`);
      for (const dep of call.dependsOn) {
        if (!(Number.isInteger(dep) && dep >= 0 && dep < i)) throw new RangeError(`program ${program.programId}: call ${i} depends on ${dep}`);
      }
      if (!(Number.isFinite(call.gapBeforeMs) && call.gapBeforeMs >= 0)) {
        throw new RangeError(`program ${program.programId}: call ${i} has gapBeforeMs ${call.gapBeforeMs}`);
      }
      if (!(Number.isInteger(call.outputTokens) && call.outputTokens >= 1)) {
        throw new RangeError(`program ${program.programId}: call ${i} has outputTokens ${call.outputTokens}`);
      }
    });
  }
  for (const id of config.endWhenFinished ?? []) {
    if (!ids.has(id)) throw new RangeError(`endWhenFinished names unknown program ${id}`);
  }
  if ((config.churnTenants?.length ?? 0) > 0 && config.policy === "agentix-tao") {
    throw new RangeError("churnTenants is not supported with agentix-tao (its tool signals follow the simulated program)");
  }
}

/** Runs the simulation to the end (every program finished) or to maxSimMs. Deterministic for the same inputs. */
export function simulate(config: SimulationConfig): SimulationResult {
  validateConfig(config);
  const wallStart = performance.now();
  const setup: PolicySetup = policySetup(config.policy, { maxInFlightPerEngine: config.maxInFlightPerEngine });
  const profile = resolveProfile(config.engineProfile ?? DEFAULT_PROFILE);
  const metricsIntervalMs = config.metricsIntervalMs ?? POOL_DEFAULTS.metricsIntervalMs;
  const saturatedMetricsIntervalMs = Math.min(config.saturatedMetricsIntervalMs ?? POOL_DEFAULTS.saturatedMetricsIntervalMs, metricsIntervalMs);
  const maxSimMs = config.maxSimMs ?? Infinity;
  const oracle = setup.dispatch.queue.priorityValue === "oracle";
  const levels = setup.dispatch.queue.levels;

  const events = new EventQueue<SimEvent>();
  const live = new Map<string, CallRun>();
  const prefixRouting = setup.dispatch.routing.policy === "cache-aware";
  const prefixIndex = prefixRouting ? new RoutedPrefixIndex(config.prefixTree ?? DEFAULT_ROUTED_PREFIX_SETTINGS) : undefined;
  const prefixMatcher: PrefixMatcher<QueuedCall> | undefined =
    prefixIndex === undefined
      ? undefined
      : {
          matchedTokens: (queuedCall, engineId) => {
            const rendered = live.get(queuedCall.callId)?.rendered;
            return rendered === undefined ? 0 : prefixIndex.matchBlocks(engineId, rendered.blockHashes) * profile.blockSize;
          },
          treeTokens: (engineId) => prefixIndex.blocks(engineId) * profile.blockSize,
        };
  const admissionSettings =
    setup.dispatch.admission === undefined || config.stepTargetFactor === undefined
      ? setup.dispatch.admission
      : { ...setup.dispatch.admission, stepTargetFactor: config.stepTargetFactor };
  const taoSettings = setup.placement === "tao" ? taoPlacementSettings(config.tao) : undefined;
  const placement: PoolPlacement = taoSettings === undefined ? { policy: "routing" } : { policy: "tao", settings: taoSettings };
  const onPlan = config.tao?.onPlan;
  // The engine profile is the KV capacity and cost model the pool would be configured with for this hardware.
  const core = new PoolCore({
    settings: { ...setup.dispatch, admission: admissionSettings, ...(config.service === undefined ? {} : { service: config.service }) },
    engines: Array.from({ length: config.engines }, (_, i) => ({
      id: `engine-${i}`,
      maxInFlight: setup.maxInFlight,
      capacityTokens: profile.kvBlocks * profile.blockSize,
      costModel: decodeCostOf(profile),
    })),
    placement,
    ...(prefixMatcher === undefined ? {} : { prefixes: prefixMatcher }),
    ...(onPlan === undefined ? {} : { stopwatch: () => performance.now(), hooks: { onPlan: (plan: TaoPlan, wallMs: number) => onPlan({ wallMs, plan }) } }),
  });
  const tao = taoSettings === undefined ? undefined : new TaoSimulation(core, taoSettings, config.tao ?? {}, (at) => events.push(at, { kind: WAKE }));
  const engines: SimEngine[] = [];
  for (const state of core.engines) {
    engines.push({
      model: new EngineModel({ profile, priorityScheduling: setup.priorityScheduling }),
      state,
      stepping: false,
      stepStartMs: 0,
      stepEndMs: 0,
      rescrapePending: false,
      meter: new StepMeter(config.window),
      stepBatch: 0,
      stepKv: 0,
    });
  }
  const engineById = new Map(engines.map((engine) => [engine.state.id, engine]));

  const churning = new Set(config.churnTenants ?? []);
  const runs: ProgramRun[] = config.programs.map((spec) => {
    const tenantId = spec.tenantId ?? DEFAULT_SIM_TENANT;
    const record: ProgramRecord = {
      programId: spec.programId,
      kind: spec.kind,
      ...(spec.tenantId === undefined ? {} : { tenantId: spec.tenantId }),
      arrivalMs: spec.arrivalMs,
      finishMs: Number.NaN,
      calls: 0,
      plannedCalls: spec.calls.length,
      generatedTokens: 0,
      promptTokens: 0,
      cachedTokens: 0,
      queueMs: 0,
      poolQueueMs: 0,
      serviceMs: 0,
      criticalPathMs: 0,
      preemptions: 0,
    };
    return {
      spec,
      record,
      tenantId,
      weight: config.tenantWeights?.[tenantId] ?? 1,
      churns: churning.has(tenantId),
      service: NO_SERVICE,
      waitMs: 0,
      affinity: undefined,
      depsLeft: undefined,
      dependents: undefined,
      callsLeft: spec.calls.length,
      prompts: undefined,
      work: undefined,
      remainingMs: 0,
    };
  });
  // Arrivals are scheduled one at a time, in (arrivalMs, input order), to keep the heap small.
  const arrivalOrder = runs.map((_, i) => i).sort((a, b) => (runs[a] as ProgramRun).spec.arrivalMs - (runs[b] as ProgramRun).spec.arrivalMs || a - b);
  let nextArrival = 0;
  const scheduleNextArrival = (): void => {
    const index = arrivalOrder[nextArrival++];
    if (index === undefined) return;
    const program = runs[index] as ProgramRun;
    events.push(program.spec.arrivalMs, { kind: ARRIVAL, program });
  };

  const callRecords: CallRecord[] | undefined = config.recordCalls === true ? [] : undefined;
  let unfinished = runs.length;
  let arrived = 0;
  const watched = new Set(config.endWhenFinished ?? []);
  let watchedLeft = watched.size;
  const samples: RunSample[] | undefined = config.sampleEveryMs === undefined ? undefined : [];
  let pumpPending = false;
  let now = 0;
  let processed = 0;

  const totalPrograms = runs.length;
  let progressStep = 0;
  const progress = (force: boolean): void => {
    if (config.onProgress === undefined) return;
    const finished = totalPrograms - unfinished;
    const fraction = Math.max(totalPrograms === 0 ? 1 : finished / totalPrograms, Number.isFinite(maxSimMs) ? now / maxSimMs : 0);
    const step = Math.floor(fraction * 100);
    if (!force && step <= progressStep) return;
    progressStep = Math.max(progressStep, step);
    config.onProgress({ simMs: now, finishedPrograms: finished, totalPrograms });
  };

  const schedulePump = (): void => {
    if (pumpPending) return;
    pumpPending = true;
    events.push(now, { kind: PUMP });
  };

  const readEngineMetrics = (engine: SimEngine): void => {
    core.engineReadings([{ id: engine.state.id, healthy: true, waiting: engine.model.numWaiting, kvUsage: engine.model.kvUsage }], now);
    // As the pool's monitor: metrics over the limits hold calls back, so they are re-read soon.
    if (metricsIntervalMs > 0 && !engine.rescrapePending && metricsSaturated(engine.state, setup.dispatch.saturation)) {
      engine.rescrapePending = true;
      events.push(now + saturatedMetricsIntervalMs, { kind: RESCRAPE, engine });
    }
  };

  const readMetrics = (): void => {
    for (const engine of engines) readEngineMetrics(engine);
  };

  const onRescrape = (engine: SimEngine): void => {
    engine.rescrapePending = false;
    readEngineMetrics(engine);
    schedulePump();
  };

  const finishProgram = (program: ProgramRun): void => {
    program.record.finishMs = now;
    if (watched.has(program.spec.programId)) watchedLeft -= 1;
    program.prompts = undefined;
    program.depsLeft = undefined;
    program.dependents = undefined;
    program.work = undefined;
    unfinished -= 1;
    progress(false);
  };

  const callReady = (program: ProgramRun, spec: CallSpec, at: number): void => {
    const call: CallRun = {
      program,
      spec,
      key: `${program.spec.programId}/${spec.callId}`,
      readyMs: at,
      // Filled when the event runs: the edge records the value when the call is issued.
      startValueMs: 0,
      dispatchMs: Number.NaN,
      engine: undefined,
      level: 0,
      promoted: false,
      engineWaitMs: Number.NaN,
      record: undefined,
      rendered: undefined,
    };
    events.push(at, { kind: READY, call });
  };

  const onArrival = (program: ProgramRun): void => {
    scheduleNextArrival();
    arrived += 1;
    const { spec } = program;
    if (spec.calls.length === 0) {
      finishProgram(program);
      return;
    }
    const depsLeft = new Int32Array(spec.calls.length);
    const dependents: number[][] = spec.calls.map(() => []);
    for (const call of spec.calls) {
      depsLeft[call.callId] = call.dependsOn.length;
      for (const dep of call.dependsOn) (dependents[dep] as number[]).push(call.callId);
    }
    program.depsLeft = depsLeft;
    program.dependents = dependents;
    program.prompts = new ProgramPrompts(spec, profile.blockSize);
    if (oracle) {
      program.work = programWorkMs(profile, spec);
      program.remainingMs = program.work.reduce((sum, w) => sum + w, 0);
    }
    tao?.programStarted(spec);
    for (const call of spec.calls) if (call.dependsOn.length === 0) callReady(program, call, now + call.gapBeforeMs);
  };

  const onReady = (ready: CallRun): void => {
    const call = ready;
    const { program, spec } = call;
    call.startValueMs = callStartValue(program.service);
    // A churning client's call is a new program to the edge: no history, no affinity hint.
    const queued: QueuedCall = {
      callId: call.key,
      tenantId: program.tenantId,
      programId: poolProgramId(call),
      threadId: spec.thread,
      serviceMs: program.churns ? 0 : program.service.attainedServiceMs,
      pathMs: program.churns ? 0 : program.service.criticalPathMs,
      waitMs: program.churns ? 0 : program.waitMs,
      weight: program.weight,
      promptTokens: promptTokenCount(spec),
      enqueuedAt: now,
    };
    if (program.affinity !== undefined && !program.churns) queued.affinityEngine = program.affinity;
    if (oracle) queued.remainingMs = Math.max(0, program.remainingMs);
    if (prefixRouting) call.rendered = promptsOf(program).render(spec.callId);
    tao?.callReady(program.spec.programId, spec, now);
    core.enqueue(queued, now);
    live.set(call.key, call);
    schedulePump();
  };

  /** The program the pool sees the call in: its own, or a one-call program of a churning client. */
  const poolProgramId = (call: CallRun): string => (call.program.churns ? `${call.program.spec.programId}~${call.spec.callId}` : call.program.spec.programId);

  const promptsOf = (program: ProgramRun): ProgramPrompts => {
    const prompts = program.prompts;
    if (prompts === undefined) throw new Error(`program ${program.spec.programId} has no prompts while a call runs`);
    return prompts;
  };

  const submit = (call: CallRun, dispatch: Dispatch, engine: SimEngine): void => {
    call.dispatchMs = now;
    call.engine = engine;
    call.level = dispatch.level;
    call.promoted = dispatch.promoted;
    const rendered = call.rendered ?? promptsOf(call.program).render(call.spec.callId);
    call.rendered = undefined;
    prefixIndex?.insert(engine.state.id, rendered.blockHashes);
    const priority = setup.enginePriority?.(dispatch.level, levels);
    try {
      engine.model.submit(
        {
          id: call.key,
          promptTokens: rendered.tokens,
          promptBlockHashes: rendered.blockHashes,
          maxTokens: call.spec.outputTokens,
          outputTokens: call.spec.outputTokens,
          ignoreEos: true,
          ...(priority === undefined ? {} : { priority }),
        },
        now,
      );
    } catch (error) {
      // A call the engine refuses (e.g. past maxModelLen) is a workload the profile cannot serve: say which.
      if (error instanceof EngineRequestError) throw new RangeError(`call ${call.key} refused by the engine: ${error.message}`);
      throw error;
    }
    if (callRecords !== undefined) {
      call.record = {
        programId: call.program.spec.programId,
        callId: call.spec.callId,
        thread: call.spec.thread,
        readyMs: call.readyMs,
        dispatchMs: now,
        finishMs: Number.NaN,
        engineId: engine.state.id,
        reason: dispatch.reason,
        level: dispatch.level,
        promoted: dispatch.promoted,
        startValueMs: call.startValueMs,
        promptTokens: rendered.tokens.length,
        cachedTokens: 0,
        outputTokens: call.spec.outputTokens,
        firstTokenMs: Number.NaN,
      };
      callRecords.push(call.record);
    }
    if (!engine.stepping) {
      engine.stepping = true;
      events.push(now, { kind: KICK, engine });
    }
  };

  const onPump = (): void => {
    pumpPending = false;
    if (metricsIntervalMs === 0) readMetrics();
    const round = core.pump(now, { plan: tao?.planNow(now) ?? false });
    // A held program turns overdue, a reservation runs out: time alone changes something then.
    if (round.wakeAt !== undefined && round.wakeAt > now) tao?.wakeAt(round.wakeAt);
    for (const dispatch of round.dispatches) {
      const call = live.get(dispatch.call.callId);
      const engine = engineById.get(dispatch.engineId);
      if (call === undefined || engine === undefined) throw new Error(`dispatch of unknown call ${dispatch.call.callId} or engine ${dispatch.engineId}`);
      submit(call, dispatch, engine);
    }
  };

  const startStep = (engine: SimEngine): void => {
    const duration = engine.model.startStep(now);
    if (duration === undefined) {
      engine.stepping = false;
      return;
    }
    engine.stepStartMs = now;
    engine.stepEndMs = now + duration;
    engine.stepBatch = engine.model.numRunning;
    engine.stepKv = engine.model.kvUsage;
    engine.meter.step(now, engine.stepEndMs, engine.stepBatch, engine.stepKv);
    events.push(engine.stepEndMs, { kind: STEP_END, engine });
  };

  const onCallFinished = (call: CallRun, event: FinishedEvent): void => {
    const { program, spec } = call;
    const engine = call.engine as SimEngine;
    live.delete(call.key);
    // The pool's rule: standalone engine time from the reported usage ("work"), or the wall time.
    const serviceMs = core.serviceMs(engine.state.id, now - call.dispatchMs, event.usage);
    const poolQueueMs = call.dispatchMs - call.readyMs;
    core.attemptEnded(call.key, { serviceMs, outputTokens: event.usage.completionTokens }, now);
    program.service = completeCall(program.service, call.startValueMs, serviceMs);
    program.waitMs += poolQueueMs;
    program.affinity = engine.state.id;
    if (program.work !== undefined) program.remainingMs -= program.work[spec.callId] ?? 0;

    const record = program.record;
    record.calls += 1;
    record.generatedTokens += event.usage.completionTokens;
    record.promptTokens += event.usage.promptTokens;
    record.cachedTokens += event.usage.cachedTokens;
    record.poolQueueMs += poolQueueMs;
    record.queueMs += poolQueueMs + (Number.isNaN(call.engineWaitMs) ? 0 : call.engineWaitMs);
    record.serviceMs = program.service.attainedServiceMs;
    record.criticalPathMs = program.service.criticalPathMs;
    record.preemptions += event.preemptions;
    if (call.record !== undefined) {
      call.record.finishMs = now;
      call.record.cachedTokens = event.usage.cachedTokens;
      call.record.firstTokenMs = event.timing.firstTokenMs;
    }

    const dependents = program.dependents as number[][];
    const depsLeft = program.depsLeft as Int32Array;
    const due: CallSpec[] = [];
    for (const next of dependents[spec.callId] ?? []) {
      const left = (depsLeft[next] ?? 0) - 1;
      depsLeft[next] = left;
      if (left === 0) {
        const nextSpec = program.spec.calls[next] as CallSpec;
        due.push(nextSpec);
        callReady(program, nextSpec, now + nextSpec.gapBeforeMs);
      }
    }
    // What the pool's relay learns from the answer: usage, and (for TAO's readiness) the tool calls it names.
    const programId = program.spec.programId;
    const pooled = poolProgramId(call);
    const facts = tao?.answerFacts(programId, event.usage, due) ?? { usage: event.usage };
    core.callLeft(pooled, { completed: true, engineId: engine.state.id, facts, promptTokensEstimate: event.usage.promptTokens }, now);
    tao?.callLeft(programId, facts, due, now);
    program.callsLeft -= 1;
    // A churned call's one-call program is over with it.
    if (program.churns) core.programEnded(pooled);
    if (program.callsLeft === 0) {
      finishProgram(program);
      if (!program.churns) core.programEnded(programId);
      tao?.programFinished(programId);
    }
    schedulePump();
  };

  const onEngineEvents = (engine: SimEngine, stepStartMs: number, engineEvents: EngineEvent[]): void => {
    for (const event of engineEvents) {
      if (event.type === "preempted") {
        // Counted by the engine and in the finished event; the meter keeps when.
        engine.meter.preempted(event.atMs);
        continue;
      }
      const call = live.get(event.requestId);
      if (call === undefined || call.engine !== engine) throw new Error(`engine ${engine.state.id} reported unknown request ${event.requestId}`);
      if (event.type === "first_token") call.engineWaitMs = Math.max(0, stepStartMs - call.dispatchMs);
      else onCallFinished(call, event);
    }
  };

  const onStepEnd = (engine: SimEngine): void => {
    const stepStartMs = engine.stepStartMs;
    const engineEvents = engine.model.finishStep();
    // Back to back, as the engine driver does: calls the pool sends in reaction to
    // these completions join the step after this one.
    startStep(engine);
    onEngineEvents(engine, stepStartMs, engineEvents);
  };

  const onScrape = (): void => {
    readMetrics();
    schedulePump();
    if (unfinished > 0) events.push(now + metricsIntervalMs, { kind: SCRAPE });
  };

  const onSample = (): void => {
    let engineRunning = 0;
    let engineWaiting = 0;
    let kv = 0;
    for (const engine of engines) {
      engineRunning += engine.model.numRunning;
      engineWaiting += engine.model.numWaiting;
      kv += engine.model.kvUsage;
    }
    const finished = totalPrograms - unfinished;
    samples?.push({ atMs: now, programsInSystem: arrived - finished, poolQueued: core.queue.size, engineRunning, engineWaiting, kvUsage: kv / engines.length });
    if (config.sampleEveryMs !== undefined) events.push(now + config.sampleEveryMs, { kind: SAMPLE });
  };

  scheduleNextArrival();
  if (metricsIntervalMs > 0 && unfinished > 0) events.push(metricsIntervalMs, { kind: SCRAPE });
  if (config.sampleEveryMs !== undefined && unfinished > 0) events.push(firstSampleAt(config.window?.startMs ?? 0, config.sampleEveryMs), { kind: SAMPLE });

  let truncated = false;
  let endedByWatch = false;
  for (let next = events.peek(); next !== undefined; next = events.peek()) {
    if (next.time > maxSimMs) {
      truncated = true;
      break;
    }
    events.pop();
    now = next.time;
    processed += 1;
    const event = next.event;
    switch (event.kind) {
      case ARRIVAL:
        onArrival(event.program);
        break;
      case READY:
        onReady(event.call);
        break;
      case KICK:
        startStep(event.engine);
        break;
      case STEP_END:
        onStepEnd(event.engine);
        break;
      case PUMP:
        onPump();
        break;
      case SCRAPE:
        onScrape();
        break;
      case RESCRAPE:
        onRescrape(event.engine);
        break;
      case WAKE:
        schedulePump();
        break;
      case SAMPLE:
        onSample();
        break;
    }
    // Every program done: engines are idle and the pool empty; pending scrapes change nothing.
    if (unfinished === 0) break;
    if (watched.size > 0 && watchedLeft === 0) {
      endedByWatch = true;
      break;
    }
    // Simulated time moves on even when no program finishes (an overloaded, truncated run).
    if ((processed & 0xfff) === 0) progress(false);
  }
  const simEndMs = truncated ? maxSimMs : now;
  now = simEndMs;

  const engineRecords: EngineRecord[] = engines.map((engine) => {
    const stats = engine.model.stats();
    // A step cut by the end of the run counts only up to it.
    let busyMs = stats.busyMs;
    if ((truncated || endedByWatch) && engine.model.isStepActive) {
      busyMs -= Math.max(0, engine.stepEndMs - simEndMs);
      engine.meter.cut(engine.stepStartMs, engine.stepEndMs, simEndMs, engine.stepBatch, engine.stepKv);
    }
    const whole = engine.meter.whole;
    return {
      engineId: engine.state.id,
      busyMs,
      prefixCacheQueries: stats.prefixCacheQueries,
      prefixCacheHits: stats.prefixCacheHits,
      preemptions: stats.preemptions,
      promptTokens: stats.promptTokens,
      generationTokens: stats.generationTokens,
      steps: stats.steps,
      batchMs: whole.batchMs,
      kvMs: whole.kvMs,
      kvMax: whole.kvMax,
      batchMax: whole.batchMax,
      ...(engine.meter.inWindow === undefined ? {} : { window: { ...engine.meter.inWindow } }),
    };
  });
  if (callRecords !== undefined) {
    for (const call of live.values()) {
      if (call.record !== undefined) continue;
      callRecords.push({
        programId: call.program.spec.programId,
        callId: call.spec.callId,
        thread: call.spec.thread,
        readyMs: call.readyMs,
        dispatchMs: Number.NaN,
        finishMs: Number.NaN,
        engineId: undefined,
        reason: undefined,
        level: 0,
        promoted: false,
        startValueMs: call.startValueMs,
        promptTokens: promptTokenCount(call.spec),
        cachedTokens: 0,
        outputTokens: call.spec.outputTokens,
        firstTokenMs: Number.NaN,
      });
    }
  }
  progress(true);
  return {
    policy: config.policy,
    engines: engineRecords,
    programs: runs.map((run) => run.record),
    simEndMs,
    wallMs: performance.now() - wallStart,
    events: processed,
    truncated,
    endedBy: truncated ? "time-cap" : endedByWatch ? "watched-finished" : "all-finished",
    ...(samples === undefined ? {} : { samples }),
    ...(callRecords === undefined ? {} : { calls: callRecords }),
    ...(tao === undefined ? {} : { tao: tao.stats() }),
  };
}
