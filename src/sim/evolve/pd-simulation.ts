import { HOLD_REASONS, type HoldReason } from "../../core/admission.js";
import { type EngineState, metricsSaturated } from "../../core/engines.js";
import { contextTag, type ContextRef, DEFAULT_RETENTION_SETTINGS, type EngineRetentionHint, RetentionPlanner, type RetentionSettings } from "../../core/kv/retention-planner.js";
import { PoolCore } from "../../core/pool-core.js";
import type { QueuedCall } from "../../core/queue.js";
import { DECODE_HOLD_MAX_MS } from "../../core/roles/decode-placement.js";
import { RatioRoleController, type RatioControllerSettings } from "../../core/roles/ratio-controller.js";
import { RoleDemandMeter, type RoleWorkModel } from "../../core/roles/role-demand-meter.js";
import { DEFAULT_ROLE_ROUND_MS, type RoleCapacity, type RoleController, type RoleSwitchMode, type SplitRole } from "../../core/roles/roles.js";
import { ThresholdRoleController, type ThresholdControllerSettings } from "../../core/roles/threshold-controller.js";
import { withAffinityTurnover } from "../../core/settings.js";
import { callStartValue, completeCall, NO_SERVICE, type ProgramService } from "../../core/service.js";
import { expectedHandoffMs, handoffFactsOf } from "../../pool/handoff-estimate.js";
import { handedOffTokens } from "../../pool/split-legs.js";
import { EventQueue } from "../des/event-queue.js";
import { DEFAULT_SIM_TENANT } from "../des/simulate.js";
import { EngineModel, type EngineEvent, type EngineStats, type FinishedEvent, type KvPull } from "../engine-model.js";
import { hostKvTierFor, type HostKvWritePolicy } from "../host-kv-tier.js";
import type { KeptOrder } from "../kv-retention-index.js";
import { KV_LINKS, kvTransferMs } from "../kv-links.js";
import { NodeKvLedger } from "../node-kv-ledger.js";
import { POOL_DEFAULTS, poolEngineDefaults } from "../pool-defaults.js";
import { decodeCostOf, type EngineProfile, type EngineProfileName, ENGINE_PROFILES } from "../profiles.js";
import { promptBlockHashes } from "../token-hash.js";
import { deriveSeed, hashString, Rng } from "../workload/prng.js";
import { answerTokensOf, keptBranchOf, threadOf, treeCallIndex, treeCallOf, treeOf, treePromptOf } from "./tree-search.js";
import { CLIENT_MAX_TOKENS, type EvolveProgram, generationOf, promptOf, type TreeShape, toolMsAfter } from "./workload.js";

/*
 * A pool of modelled engines (EngineModel: the simulated engine's own step timing and
 * KV cache) serving agent programs with fixed or evolving prefill/decode roles, in
 * virtual time (issue 13). A disaggregated call is prefilled on a prefill engine
 * (max_tokens 1: its first token, as vLLM's prefill instance answers under the KV
 * connector), then decoded on a decode engine that pulls its KV over the engine link
 * (kv-links.ts) as vLLM's NixlConnector does: the decode request waits in that engine's
 * queue until blocks for its whole prompt fit, the pull starts then, and once the KV is
 * in it computes only the prompt's last token (EngineModel, EngineRequest.remoteKv); the
 * prefill engine keeps its copy pinned until the pull ends (vLLM's delay_free_blocks).
 * A mixed engine does both. The role controllers are the core's (src/core/roles/). A
 * switch overlaps by default (the simulated engine honours kv_transfer_params on any
 * request, as a vLLM engine started kv_both does): the engine takes its new role's work
 * at once, none of its old role's, and its old role's calls finish in the same steps;
 * with `roleSwitch: "drain"` it takes nothing new until it is empty. Either way no call
 * is lost.
 *
 * KV beyond one GPU (issue 13), when asked: the engines form one node sharing a host-memory
 * KV tier (host-kv-tier.ts), and branch-aware retention tags each call's KV with its
 * context (program:main:generation) and sends the core's RetentionPlanner hints to the
 * engines: keep through a tool wait predicted from the simulator's known tool time
 * with a predictor's error, keep a split call's prefill copy through its transfer and
 * decode, normal when the context is used again, drop a compacted generation and every
 * context of an ended program. The planner is told what the pool tells it, in the same
 * order (callStarted at the prefill, callEnded when it ends, heldOn at the decode).
 * Every run counts recomputed tokens (a node-wide ledger of computed blocks).
 *
 * A tree-search program (tree-search.ts) runs its branches as parallel threads; when a
 * round's last branch answers, the agent keeps one and abandons the rest, and, when asked
 * (threadEndedSignal), the planner hears threadEnded for each abandoned one at that
 * moment, as the edge tells it after the agent's DELETE of the thread.
 *
 * Demand is measured by the core's RoleDemandMeter, as the pool measures it: each
 * split call's prefill work when the pump sends it to a prefill engine (its whole prompt,
 * as the pool prices it; the engines' reports of what they found cached correct it), its
 * first token, the KV handed to decode, and each decode engine's tokens per round at its
 * mean context; calls still in the pool's queue are in the readings' prefill queue.
 *
 * The pool is the pool core (src/core/pool-core.ts, the object the pool service drives on
 * real time and src/sim/des/simulate.ts on virtual time), built from the pool config's
 * defaults (POOL_DEFAULTS.scheduling; each engine as the pool configures one of this
 * profile: count cap, decode cap, KV capacity, cost model; placement: routing), and
 * driven as simulate.ts drives it: a program's call is enqueued when the program issues
 * it (its TTFT and end to end count from then), a pump per instant hands queued calls
 * out in the queue's order (PLAS by default) through admission (KV projected at peak,
 * the count cap, the scraped backlog of an engine that is not a prefill engine) and routing (a long prompt back to the engine that
 * prefilled the program's last call, its prefix cached there, unless clearly busier;
 * a short one to the least loaded), only to engines whose role takes new calls (a
 * prefill engine: the call's prefill; a mixed one: the whole call); engine readings on a
 * scrape every metricsIntervalMs (a saturated engine re-read sooner, as the pool's
 * monitor), attemptEnded when a leg leaves its engine, callLeft once per call.
 *
 * Roles and switches are the core's (PoolCore.startRoleSwitch, its EngineRoleBook): which
 * engines take new calls and which decodes, when a switch is complete (each request
 * counted by the role its engine had when it was given it). The controller reads the
 * core's roleStates and roleReadings, as the pool's control loop does.
 *
 * A decode is placed by PoolCore.admitDecode at the prefill's end: among the engines that
 * take decodes and admit one (below their decode cap, the profile's batch, and no scraped
 * backlog), the one with the most KV room on the core's one account (PoolCore.kv, which
 * counts every leg sent and not yet ended, so decodes placed and still waiting for blocks
 * count); none admitting, the decode is held (its prompt pinned on the prefill engine) and
 * asked again at every pump (held decodes first, as the pool's dispatcher), and past
 * DECODE_HOLD_MAX_MS it goes to the least loaded; its end is PoolCore.decodeEnded. The
 * demand meter hears the decode when its prefill ends (as the pool's).
 *
 * Before the queue (main at 3998b3a) a new call went at once to the program's last engine
 * unless clearly busier; what the queue changed, and the pool rule it showed wrong (a
 * prefill engine's waiting queue taken for a backlog), are in the README, "Evolving pools".
 */

export type EvolvePolicy =
  | { kind: "mixed" }
  | { kind: "fixed"; prefillEngines: number }
  | { kind: "threshold"; prefillEngines: number; settings?: Partial<ThresholdControllerSettings> }
  | { kind: "ratio"; prefillEngines: number; settings?: Partial<RatioControllerSettings> };

export interface EvolveConfig {
  engines: number;
  profile: EngineProfileName;
  programs: readonly EvolveProgram[];
  policy: EvolvePolicy;
  /** The controller's round (ms; default the pool's, DEFAULT_ROLE_ROUND_MS). */
  roundMs?: number;
  /** How engines switch roles (default "overlap": the simulated engine serves both sides, as vLLM started kv_both). */
  roleSwitch?: RoleSwitchMode;
  /** The pool's count cap per engine (calls in flight; default what the pool gives an engine of the profile, its maxInFlight): past it new calls wait in the pool's queue. */
  maxInFlight?: number;
  /** The decode cap per engine (decodes in flight; default what the pool gives an engine of the profile: its batch, vLLM's max_num_seqs): a decode is held at it. */
  maxDecodes?: number;
  /** How long a decode no engine admits is held before the least loaded takes it (ms; default the pool's DECODE_HOLD_MAX_MS; 0: never held, the ablation). */
  decodeHoldMaxMs?: number;
  /** Stop here even if programs are left (ms of virtual time). */
  maxSimMs?: number;
  /** The engines share a node's host KV tier (capacity from the profile's datasheets, or `hostKvBlocks`). */
  hostTier?: boolean;
  hostKvBlocks?: number;
  /** When a block reaches the host tier (default write-through, as vLLM's, SGLang's and LMCache's tiers). */
  hostWritePolicy?: HostKvWritePolicy;
  /** Branch-aware retention hints from the core's RetentionPlanner. */
  retention?: boolean;
  /** The planner's settings over its defaults (e.g. learnKeepMargin: false, the fixed 2 s margin). */
  retentionSettings?: Partial<RetentionSettings>;
  /** How the engines order kept contexts among themselves (default furthest-return). */
  keptOrder?: KeptOrder;
  /**
   * The readiness predictor's error: a tool wait of t is predicted as t × a uniform
   * factor in [1 − e, 1 + e] (default 0.3: TAO's predictor from tool history and hints,
   * right to within a third; the planner adds its own margin).
   */
  predictionError?: number;
  /** The routing's turnover rule over the pool's default (routing.affinityTurnover: a fraction of KV capacity; null: hints always kept). */
  affinityTurnover?: number | null;
  /** Which of the planner's hints reach the engines: all (default), or only drops (the ablation: tags and drops without keeps). */
  retentionHints?: "all" | "drops";
  /** Tree-search programs' abandoned branches reach the planner as threadEnded (the edge's thread_ended; default true). */
  threadEndedSignal?: boolean;
}

export interface EvolveCallRecord {
  programId: string;
  /** The call's thread: "main", or a tree search's branch (r<round>b<branch>). */
  threadId: string;
  kind: string;
  phase: number;
  /** When the program issued the call (it entered the pool's queue), when the pool sent it to the engine that prefilled it, its first token, its end. */
  arrivalMs: number;
  dispatchMs: number;
  firstTokenMs: number;
  finishMs: number;
  promptTokens: number;
  outputTokens: number;
  /** Prompt tokens the engines computed (not found cached). */
  computedPromptTokens: number;
  /** The engine that prefilled it (a mixed engine: the one that ran it), and the one its decode was given to (undefined: no decode leg). */
  prefillEngineId: string;
  decodeEngineId: string | undefined;
  /** KV moved from the prefill engine to the decode engine (ms, from the pull's start: the decode engine had room; 0 on a mixed engine). */
  transferMs: number;
  /** The decode leg's wait for blocks on its engine (hand-off → pull start), and for the KV (pull start → schedulable), ms. */
  decodeRoomWaitMs: number;
  decodeKvWaitMs: number;
  /** The decode's hold before an engine admitted it (prefill's end → placement, ms; 0 if admitted at once), and why it was first held. */
  decodeHeldMs: number;
  decodeHoldReason: HoldReason | undefined;
  /** Prompt tokens the decode engine computed past the one it must (the last, for its logits): the handed-over KV recomputed (0 on a mixed engine). */
  decodeRecomputedTokens: number;
}

export interface RoleSwitchRecord {
  atMs: number;
  /** When the switch was complete: the engine had drained and took its new role, or (overlap) its old role's last call finished. */
  doneMs: number | undefined;
  mode: RoleSwitchMode;
  engineId: string;
  from: SplitRole;
  to: SplitRole;
  reason: string;
}

/** How engines switch roles and how often the controller looks (a bench row's departure from the simulator's defaults). */
export type EvolveSwitching = Pick<EvolveConfig, "roleSwitch" | "roundMs">;

/** The pool rules a bench run may set over the pool's defaults (its ablations). */
export type EvolvePoolRules = Pick<EvolveConfig, "maxDecodes" | "decodeHoldMaxMs" | "affinityTurnover">;

/** KV beyond one GPU, summed over the pool's engines. */
export interface EvolveKvTotals {
  gpuHitTokens: number;
  /** Prompt tokens decode engines pulled from prefill engines (a split call's handed-over KV; not prefix hits). */
  pulledTokens: number;
  hostHitTokens: number;
  recomputedTokens: number;
  pcieBytes: number;
  keepsApplied: number;
  normalsApplied: number;
  dropsApplied: number;
  /** Hints the planner sent (some name a context an engine no longer holds: not applied). */
  hintsSent: number;
  /** Drops of abandoned branches (threadEnded) an engine applied. */
  branchDropsApplied: number;
  /** Cached blocks evicted from a dropped context, by LRU (ordinary), and from a kept context. */
  evictedDroppedBlocks: number;
  evictedOrdinaryBlocks: number;
  evictedKeptBlocks: number;
  /** The planner's learned keep factor at the end (undefined: no planner, or the fixed margin applied). */
  keepFactor: number | undefined;
  /** Affinity hints the pool core dropped: their engine had turned over its KV since (core/kv/affinity-turnover.ts). */
  affinityHintsDropped: number;
}

export interface EvolveResult {
  kv: EvolveKvTotals;
  calls: EvolveCallRecord[];
  switches: RoleSwitchRecord[];
  programsFinished: number;
  programsStarted: number;
  simMs: number;
  /** Prefill engines at each round (a fixed split's is constant). */
  prefillEnginesByRound: number[];
  /** KV blocks the engines still held when the run ended: 0 unless it stopped at maxSimMs (a pinned copy never let go would show here). */
  kvBlocksHeldAtEnd: number;
}

/** What a decode engine may fill: its KV, less the pool's admission headroom (90 %). */
export function roleCapacityOf(profile: EngineProfile): RoleCapacity {
  return { decodeKvTokens: profile.kvBlocks * profile.blockSize * 0.9 };
}

/** The cost model the demand meter prices work with: the profile's terms, a full batch of its max_num_seqs. */
export function roleWorkModelOf(profile: EngineProfile): RoleWorkModel {
  return { ...decodeCostOf(profile), batchSequences: profile.maxNumSeqs };
}

interface SimEngine {
  id: string;
  model: EngineModel;
  /** The engine as the pool core sees it: calls in flight (the core's count), its waiting queue and KV use as last read. */
  state: EngineState;
  stepping: boolean;
  generatedAtRound: number;
  /** A wake is queued for then (a KV pull ends while the engine has nothing else to run). */
  wakeAtMs: number | undefined;
  /** A re-read of its metrics alone is queued (its last ones said saturated), as the pool's monitor does. */
  rescrapePending: boolean;
}

interface CallRun {
  program: ProgramRun;
  index: number;
  key: string;
  /** The call as the pool core holds it (queue, account, its decode), from its issue to its end. */
  queued: QueuedCall;
  /** ATLAS value recorded when issued, and the service its legs were charged (the prefill's, then the decode's), as the edge adds them up. */
  startValueMs: number;
  serviceMs: number;
  /** When its current leg was sent to its engine (the service's wall clock). */
  legStartMs: number;
  context: ContextRef;
  tag: string | undefined;
  prompt: string[];
  hashes: number[];
  record: EvolveCallRecord;
  /** Where it was prefilled, and the blocks pinned there until the decode engine's pull ends. */
  prefillEngine: SimEngine | undefined;
  held: number[] | undefined;
}

interface ProgramRun {
  spec: EvolveProgram;
  prompt: string[] | undefined;
  /** The engine that prefilled its last finished call (the edge's affinity hint: its prefix is cached there). */
  lastEngine: string | undefined;
  /** The edge's values for it: attained service (PLAS), critical path (ATLAS), and the pool-queue time of its finished calls. */
  service: ProgramService;
  waitMs: number;
  /** A tree search's: each live branch's last prompt, the round's shared context, and branches of the round that answered. */
  branchPrompts: Map<string, string[]>;
  roundContext: string[] | undefined;
  branchesAnswered: number;
}


type SimEvent =
  | { kind: "arrival"; program: ProgramRun }
  | { kind: "issue"; program: ProgramRun; index: number }
  | { kind: "step"; engine: SimEngine }
  | { kind: "pulled"; call: CallRun }
  | { kind: "wake"; engine: SimEngine }
  | { kind: "round" }
  | { kind: "scrape" }
  | { kind: "rescrape"; engine: SimEngine }
  | { kind: "pump" }
  | { kind: "holdBound" };

/** The nearest-rank percentile `p` (0–1) of `values`; undefined when empty. The run summaries' rule, shared with the benches that read a run's calls. */
export const percentileOf = (values: readonly number[], p: number): number | undefined => {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
};

export function simulateEvolvingPool(config: EvolveConfig): EvolveResult {
  const profile = ENGINE_PROFILES[config.profile];
  const link = KV_LINKS[config.profile];
  const roundMs = config.roundMs ?? DEFAULT_ROLE_ROUND_MS;
  const switchMode: RoleSwitchMode = config.roleSwitch ?? "overlap";
  const maxSimMs = config.maxSimMs ?? Number.POSITIVE_INFINITY;
  const policy = config.policy;
  const split = policy.kind !== "mixed";
  const prefillAtStart = policy.kind === "mixed" ? 0 : policy.prefillEngines;
  if (split && (prefillAtStart < 1 || prefillAtStart > config.engines - 1)) {
    throw new RangeError(`a split pool of ${config.engines} engines needs 1–${config.engines - 1} prefill engines, got ${prefillAtStart}`);
  }
  if (config.decodeHoldMaxMs !== undefined && !(config.decodeHoldMaxMs >= 0)) throw new RangeError(`decodeHoldMaxMs must be >= 0, got ${config.decodeHoldMaxMs}`);
  if (config.maxDecodes !== undefined && !(Number.isInteger(config.maxDecodes) && config.maxDecodes >= 1)) throw new RangeError(`maxDecodes must be an integer >= 1, got ${config.maxDecodes}`);
  if (config.maxInFlight !== undefined && !(Number.isInteger(config.maxInFlight) && config.maxInFlight >= 1)) throw new RangeError(`maxInFlight must be an integer >= 1, got ${config.maxInFlight}`);
  const controller: RoleController | undefined =
    policy.kind === "ratio"
      ? new RatioRoleController(roleCapacityOf(profile), policy.settings)
      : policy.kind === "threshold"
        ? new ThresholdRoleController(policy.settings)
        : undefined;

  const hostTier = config.hostTier === true ? hostKvTierFor(config.profile, profile.blockSize, { capacityBlocks: config.hostKvBlocks, keptOrder: config.keptOrder, writePolicy: config.hostWritePolicy }) : undefined;
  const nodeLedger = new NodeKvLedger();
  const planner = config.retention === true ? new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, ...config.retentionSettings }) : undefined;
  const predictionError = config.predictionError ?? 0.3;
  // The pool core, built as the pool builds it from its config's defaults (scheduling: queue, routing, saturation,
  // admission; placement: routing) and an engine configured with this profile (count cap, decode cap, KV capacity, cost model).
  if (POOL_DEFAULTS.placement.policy !== "routing") throw new Error(`the evolve simulator drives the pool's routing placement; the pool's default is ${POOL_DEFAULTS.placement.policy}`);
  const configured = poolEngineDefaults(config.profile);
  const defaults = POOL_DEFAULTS.scheduling;
  const scheduling = config.affinityTurnover === undefined ? defaults : { ...defaults, routing: withAffinityTurnover(defaults.routing, config.affinityTurnover) };
  const core = new PoolCore({
    settings: scheduling,
    engines: Array.from({ length: config.engines }, (_, i) => ({
      id: `engine-${i}`,
      maxInFlight: config.maxInFlight ?? configured.maxInFlight,
      maxDecodes: config.maxDecodes ?? configured.maxDecodes,
      capacityTokens: configured.kvCapacityTokens,
      costModel: configured.decodeCost,
      role: !split ? "mixed" : i < prefillAtStart ? "prefill" : "decode",
      switchMode,
    })),
    placement: { policy: "routing" },
  });
  const engines: SimEngine[] = core.engines.map((state) => ({
    id: state.id,
    model: new EngineModel({
      profile: config.profile,
      hostTier,
      nodeLedger,
      kvPullMs: (tokens) => kvTransferMs(link, tokens, "engine"),
      ...(config.keptOrder === undefined ? {} : { keptOrder: config.keptOrder }),
    }),
    stepping: false,
    state,
    generatedAtRound: 0,
    wakeAtMs: undefined,
    rescrapePending: false,
  }));
  const events = new EventQueue<SimEvent>();
  const calls = new Map<string, CallRun>();
  const engineById = new Map(engines.map((e) => [e.id, e]));
  /** Each engine's switch under way, recorded when it started; the core's book says when it is complete. */
  const openSwitches = new Map<string, RoleSwitchRecord>();
  /** Prefilled calls no decode engine admitted yet, oldest first, with when they were first held. */
  const heldDecodes = new Map<string, { call: CallRun; sinceMs: number }>();
  const decodeHoldMaxMs = config.decodeHoldMaxMs ?? DECODE_HOLD_MAX_MS;
  const noEngines: ReadonlySet<string> = new Set();
  let pumpPending = false;
  let hintsSent = 0;
  let branchDropsApplied = 0;
  const threadEndedSignal = config.threadEndedSignal ?? true;
  const dropsOnly = config.retentionHints === "drops";
  const result: EvolveResult = { kv: kvTotals([], 0, 0, undefined, 0), calls: [], switches: [], programsFinished: 0, programsStarted: 0, simMs: 0, prefillEnginesByRound: [], kvBlocksHeldAtEnd: 0 };
  // Demand measured as the pool measures it (the core's meter), on virtual time.
  const workModel = roleWorkModelOf(profile);
  const meter = new RoleDemandMeter(workModel, 0);
  const kvTokensOf = (engine: SimEngine) => engine.model.kvUsage * profile.kvBlocks * profile.blockSize;
  let now = 0;

  for (const spec of config.programs) {
    const program: ProgramRun = { spec, prompt: undefined, lastEngine: undefined, service: NO_SERVICE, waitMs: 0, branchPrompts: new Map(), roundContext: undefined, branchesAnswered: 0 };
    events.push(spec.arrivalMs, { kind: "arrival", program });
  }
  if (controller !== undefined) events.push(roundMs, { kind: "round" });
  // The pool reads its engines' metrics every metricsIntervalMs (its config's default).
  events.push(POOL_DEFAULTS.metricsIntervalMs, { kind: "scrape" });

  const kick = (engine: SimEngine) => {
    if (engine.stepping) return;
    const duration = engine.model.startStep(now);
    for (const pull of engine.model.takeKvPulls()) pullStarted(pull);
    if (duration === undefined) {
      // Nothing to run now; a pull in progress says when there will be.
      const next = engine.model.nextWakeMs();
      const wake = next === undefined ? undefined : Math.max(now, next);
      if (wake !== undefined && (engine.wakeAtMs === undefined || wake < engine.wakeAtMs)) {
        engine.wakeAtMs = wake;
        events.push(wake, { kind: "wake", engine });
      }
      return;
    }
    engine.stepping = true;
    events.push(now + duration, { kind: "step", engine });
  };

  /** A decode engine had room for a split call's prompt and started pulling its KV: the transfer runs from now. */
  const pullStarted = (pull: KvPull) => {
    const call = calls.get(pull.requestId.split("/")[0] as string);
    if (call === undefined) return;
    call.record.transferMs = pull.landsAtMs - pull.atMs;
    events.push(pull.landsAtMs, { kind: "pulled", call });
  };

  /** The pool pumps once per instant, whatever woke it (a call issued, a leg ended, a reading, a round). */
  const schedulePump = () => {
    if (pumpPending) return;
    pumpPending = true;
    events.push(now, { kind: "pump" });
  };

  /**
   * A split call's prefill is done and its decode placed: the planner's rule keeps its copy
   * on the prefill engine through the transfer and decode the pool expects (the pool's own
   * estimate, handoff-estimate.ts: the output admission expects, at the decode engine's
   * projected step; not the call's true output).
   */
  const keepThroughDecode = (call: CallRun, decodeEngineId: string) => {
    if (planner === undefined || call.prefillEngine === undefined) return;
    const expectedMs = expectedHandoffMs(handoffFactsOf(core, call.queued, decodeEngineId, link));
    sendHints(planner.prefillHandedOff(call.context, call.prefillEngine.id, expectedMs, now));
  };

  /** Returns the hints an engine applied (it held the context). */
  const sendHints = (hints: readonly EngineRetentionHint[]): number => {
    let applied = 0;
    for (const { engineId, hint } of hints) {
      if (dropsOnly && hint.action !== "drop") continue;
      const { tag, ...signal } = hint;
      if (engineById.get(engineId)?.model.setRetention(tag, signal, now) === true) applied++;
      hintsSent++;
    }
    return applied;
  };

  const submit = (engine: SimEngine, id: string, call: CallRun, maxTokens: number, leg: "whole" | "decode" = "whole") => {
    engine.model.submit(
      {
        id,
        promptTokens: call.prompt,
        promptBlockHashes: call.hashes,
        maxTokens,
        ignoreEos: true,
        ...(call.tag === undefined ? {} : { retentionTag: call.tag }),
        // The decode leg pulls the prefill's KV (timed by the engine link).
        ...(leg === "decode" ? { remoteKv: {} } : {}),
      },
      now,
    );
    call.legStartMs = now;
    // As the pool: a split call starts at its prefill (and ends there, for the planner); its decode engine then holds the context too.
    if (planner !== undefined && leg === "decode") planner.heldOn(call.context, engine.id);
    else if (planner !== undefined) sendHints(planner.callStarted(call.context, engine.id, now));
    kick(engine);
  };

  const issue = (program: ProgramRun, index: number) => {
    const tree = program.spec.shape.tree === undefined ? undefined : treeOf(program.spec);
    const branch = tree === undefined ? undefined : treeCallOf(tree, index);
    const previous = branch === undefined ? program.prompt : branch.step === 0 ? program.roundContext : program.branchPrompts.get(branch.thread);
    const prompt = branch === undefined ? promptOf(program.spec, index, previous) : treePromptOf(program.spec, index, previous);
    if (branch === undefined) program.prompt = prompt;
    else program.branchPrompts.set(branch.thread, prompt);
    const context: ContextRef = { programId: program.spec.id, threadId: branch?.thread ?? "main", generation: generationOf(program.spec.shape, index) };
    if (planner !== undefined) sendHints(planner.callArrived(context, now));
    const record: EvolveCallRecord = {
      programId: program.spec.id,
      threadId: context.threadId,
      kind: program.spec.kind,
      phase: program.spec.phase,
      arrivalMs: now,
      dispatchMs: Number.NaN,
      firstTokenMs: Number.NaN,
      finishMs: Number.NaN,
      promptTokens: prompt.length,
      outputTokens: program.spec.shape.outputTokens,
      computedPromptTokens: 0,
      prefillEngineId: "",
      decodeEngineId: undefined,
      transferMs: 0,
      decodeRecomputedTokens: 0,
      decodeRoomWaitMs: 0,
      decodeKvWaitMs: 0,
      decodeHeldMs: 0,
      decodeHoldReason: undefined,
    };
    const key = `${program.spec.id}#${index}`;
    if (record.outputTokens > CLIENT_MAX_TOKENS) throw new RangeError(`${key}: an answer of ${record.outputTokens} tokens is past the client's max_tokens (${CLIENT_MAX_TOKENS})`);
    // What the edge tells the pool of the call: its program's values, and the engine that served the program last.
    const queued: QueuedCall = {
      callId: key,
      tenantId: DEFAULT_SIM_TENANT,
      programId: program.spec.id,
      threadId: context.threadId,
      serviceMs: program.service.attainedServiceMs,
      pathMs: program.service.criticalPathMs,
      waitMs: program.waitMs,
      weight: 1,
      promptTokens: prompt.length,
      // What an agent sends: a generous cap, not its answer's length (the engine stops at the answer's end, as at EOS).
      maxTokens: CLIENT_MAX_TOKENS,
      enqueuedAt: now,
      ...(program.lastEngine === undefined ? {} : { affinityEngine: program.lastEngine }),
    };
    const call: CallRun = {
      program,
      index,
      key,
      queued,
      startValueMs: callStartValue(program.service),
      serviceMs: 0,
      legStartMs: Number.NaN,
      context,
      tag: planner === undefined ? undefined : contextTag(context),
      prompt,
      hashes: promptBlockHashes(prompt, profile.blockSize),
      record,
      prefillEngine: undefined,
      held: undefined,
    };
    calls.set(key, call);
    // It waits in the pool's queue (its TTFT and e2e count from now) until the pump gives it an engine that prefills.
    // A keep the engines heard (not the drops-only ablation's) shields the prefix from its engine's turnover.
    const kept = planner !== undefined && !dropsOnly && queued.affinityEngine !== undefined && planner.keeps(context, queued.affinityEngine, now);
    core.enqueue(queued, now, kept);
    schedulePump();
  };

  /** The pool sent the call to an engine that takes new calls: its prefill there, or the whole call on a mixed engine. */
  const dispatched = (call: CallRun, engine: SimEngine) => {
    call.prefillEngine = engine;
    call.record.prefillEngineId = engine.id;
    call.record.dispatchMs = now;
    if (split) {
      // As the pool's split call (kv-transfer-split.ts): its prefill work is heard when it is sent, priced as the pool prices it (its whole prompt, nothing assumed cached).
      meter.prefillQueued(call.key, call.queued.promptTokens, 0);
      submit(engine, `${call.key}/p`, call, 1);
    } else submit(engine, `${call.key}/m`, call, call.record.outputTokens);
  };

  /**
   * The pool's pump (as the pool's dispatcher: held decodes first, their KV pinned on a
   * prefill engine while they wait; then the queue, in its priority order, through
   * admission and routing to engines whose role takes new calls).
   */
  const pump = () => {
    pumpPending = false;
    placeHeldDecodes();
    for (const dispatch of core.pump(now).dispatches) {
      const call = calls.get(dispatch.call.callId);
      const engine = engineById.get(dispatch.engineId);
      if (call === undefined || engine === undefined) throw new Error(`dispatch of unknown call ${dispatch.call.callId} or engine ${dispatch.engineId}`);
      dispatched(call, engine);
    }
  };

  /** The program waits `waitMs` (a tool, a decision) after call `index`: the planner hears the readiness predictor's guess. */
  const waitAfter = (spec: EvolveProgram, index: number, waitMs: number) => {
    if (planner === undefined) return;
    // The readiness predictor's guess: the true time, off by up to ±predictionError.
    const rng = new Rng(deriveSeed(hashString(spec.id), index, 7));
    const predictedMs = waitMs * (1 - predictionError + 2 * predictionError * rng.nextOpen());
    sendHints(planner.toolWait(spec.id, now + predictedMs, now));
  };

  const programDone = (spec: EvolveProgram) => {
    result.programsFinished += 1;
    core.programEnded(spec.id);
    if (planner !== undefined) sendHints(planner.programEnded(spec.id));
  };

  /** The call is answered: the edge's values move on (service, pool wait, affinity to the engine holding its prefix), and it leaves the pool once. */
  const callDone = (call: CallRun, event: FinishedEvent) => {
    const { program, record } = call;
    record.finishMs = now;
    meter.forget(call.key);
    result.calls.push(record);
    calls.delete(call.key);
    program.service = completeCall(program.service, call.startValueMs, call.serviceMs);
    program.waitMs += record.dispatchMs - record.arrivalMs;
    program.lastEngine = record.prefillEngineId;
    const usage = { promptTokens: record.promptTokens, completionTokens: record.outputTokens, cachedTokens: Math.max(0, record.promptTokens - record.computedPromptTokens) };
    core.callLeft(program.spec.id, { completed: true, engineId: record.prefillEngineId, facts: { usage }, promptTokensEstimate: event.usage.promptTokens }, now);
    const spec = program.spec;
    if (spec.shape.tree !== undefined) return branchCallDone(call, treeOf(spec));
    if (call.index + 1 < spec.shape.calls) {
      const toolMs = toolMsAfter(spec, call.index);
      waitAfter(spec, call.index, toolMs);
      events.push(now + toolMs, { kind: "issue", program: call.program, index: call.index + 1 });
    } else programDone(spec);
  };

  /** A branch's call answered: its next call after the tool, or, the round's last, the decision: keep one branch, abandon the rest, fork the next round. */
  const branchCallDone = (call: CallRun, tree: TreeShape) => {
    const { program } = call;
    const spec = program.spec;
    const { round, step } = treeCallOf(tree, call.index);
    if (step + 1 < tree.branchCalls) {
      const toolMs = toolMsAfter(spec, call.index);
      waitAfter(spec, call.index, toolMs);
      events.push(now + toolMs, { kind: "issue", program, index: call.index + 1 });
      return;
    }
    program.branchesAnswered += 1;
    if (program.branchesAnswered < tree.forks) return;
    program.branchesAnswered = 0;
    const kept = keptBranchOf(spec, round);
    const keptLast = treeCallIndex(tree, round, kept, tree.branchCalls - 1);
    program.roundContext = [...(program.branchPrompts.get(threadOf(round, kept)) ?? []), ...answerTokensOf(spec, keptLast)];
    program.branchPrompts.clear();
    // After the decision, before the wait's keep: an abandoned branch is not kept through it.
    if (planner !== undefined && threadEndedSignal) {
      for (let b = 0; b < tree.forks; b++) if (b !== kept) branchDropsApplied += sendHints(planner.threadEnded(spec.id, threadOf(round, b), 0));
    }
    if (round + 1 >= tree.rounds) return programDone(spec);
    waitAfter(spec, call.index, tree.decisionMs);
    for (let b = 0; b < tree.forks; b++) events.push(now + tree.decisionMs, { kind: "issue", program, index: treeCallIndex(tree, round + 1, b, 0) });
  };

  const onEngineEvent = (engine: SimEngine, event: EngineEvent) => {
    const [key, part] = event.requestId.split("/") as [string, string];
    const call = calls.get(key);
    if (call === undefined) return;
    // As the pool: the leg's slot and KV go back (a switch may complete) before the call goes on (its decode placed).
    if (event.type === "finished") legEnded(engine, call, part, event);
    if (event.type === "first_token" && part !== "d") {
      call.record.firstTokenMs = event.atMs;
      // A split call's prefill reports what it found cached when it finishes (the same step): the meter hears it then.
      if (part !== "p") meter.prefillDone(key, event.atMs - call.record.arrivalMs);
    }
    if (event.type === "first_token" && part === "d") meter.decodeStarted(key);
    if (event.type !== "finished") return;
    if (part !== "d") planner?.callEnded(call.context, now);
    if (part !== "d") call.record.computedPromptTokens += event.usage.promptTokens - event.usage.cachedTokens;
    else {
      call.record.decodeRecomputedTokens = Math.max(0, event.prefillTokens - 1);
      call.record.decodeRoomWaitMs = event.remoteKv?.roomWaitMs ?? 0;
      call.record.decodeKvWaitMs = event.remoteKv?.kvWaitMs ?? 0;
    }
    if (part === "p") meter.prefillDone(key, call.record.firstTokenMs - call.record.arrivalMs, event.usage);
    if (part !== "p" && event.timing.tpotMs !== undefined) {
      meter.interToken(event.timing.tpotMs);
    }
    if (part === "p" && call.record.outputTokens > 1) {
      handOff(call, key);
      return;
    }
    callDone(call, event);
  };

  /**
   * A split call's prefill is done: its prompt's blocks stay pinned on the prefill engine
   * (in this step, before any admission could evict them) until the decode engine's pull
   * ends, and its decode is placed as the pool places it (placeDecode), or held.
   */
  const handOff = (call: CallRun, key: string) => {
    call.held = call.prefillEngine?.model.holdCachedPrefix(call.hashes);
    // Decode demand from now, placed or held (as the pool's meter hears it).
    meter.decodeQueued(key, call.prompt.length);
    if (placeDecode(call, key, 0)) return;
    heldDecodes.set(key, { call, sinceMs: now });
    // Past the bound it is placed whatever the engines say: a wake then, in case nothing else happens.
    events.push(now + decodeHoldMaxMs, { kind: "holdBound" });
  };

  /**
   * The pool core's decode placement (PoolCore.admitDecode, core/roles/decode-placement.ts):
   * among the engines that take decodes, one that admits a decode by the pool's rule
   * (below its decode cap, no scraped backlog), the most KV room on the core's account
   * first (which counts decodes placed and still waiting for blocks); none admitting, it
   * is held (false) until `heldMs` reaches the hold bound. Placed, the decode request goes
   * to that engine, where it waits for blocks for its whole prompt, then pulls the KV.
   */
  const placeDecode = (call: CallRun, key: string, heldMs: number): boolean => {
    const requestId = `${key}/d`;
    const admitted = core.admitDecode(call.queued, noEngines, heldMs, decodeHoldMaxMs);
    if (admitted === undefined) throw new Error(`no decode engine takes ${requestId}`);
    if ("held" in admitted) {
      call.record.decodeHoldReason ??= admitted.held;
      return false;
    }
    const engine = engineById.get(admitted.engineId) as SimEngine;
    call.record.decodeHeldMs = heldMs;
    call.record.decodeEngineId = engine.id;
    // The planner's keep covers the transfer as if it started now (it cannot know the wait for room).
    keepThroughDecode(call, engine.id);
    submit(engine, requestId, call, call.record.outputTokens - 1, "decode");
    return true;
  };

  /** Held decodes are asked again, oldest first (room may have appeared, or the bound passed). */
  const placeHeldDecodes = () => {
    for (const [key, held] of [...heldDecodes]) if (placeDecode(held.call, key, now - held.sinceMs)) heldDecodes.delete(key);
  };

  /** A metrics reading of an engine, as the pool's monitor takes it (waiting queue, KV use: the core's account is corrected by it); saturated, it is read again soon. */
  const readEngine = (engine: SimEngine) => {
    const reading = { id: engine.id, healthy: true, waiting: engine.model.numWaiting, kvUsage: engine.model.kvUsage };
    core.engineReadings([reading], now);
    // The monitor's rule (engine-monitor.ts): the reading itself over the limits, whatever the engine's role.
    if (!engine.rescrapePending && metricsSaturated(reading, scheduling.saturation)) {
      engine.rescrapePending = true;
      events.push(now + Math.min(POOL_DEFAULTS.saturatedMetricsIntervalMs, POOL_DEFAULTS.metricsIntervalMs), { kind: "rescrape", engine });
    }
  };

  /**
   * A leg left its engine: its slot and KV leave the core's account (a prefill's, whose
   * one token is not the call's output, as the pool's attemptEnded; a decode's by
   * decodeEnded, whose output teaches the account's averages), its service is charged
   * (the pool's rule: standalone engine time from the usage; a decode's prompt came as
   * KV), and a switch under way there may be complete.
   */
  const legEnded = (engine: SimEngine, call: CallRun, part: string, event: FinishedEvent) => {
    const wallMs = now - call.legStartMs;
    const usage = part === "d" ? handedOffTokens(event.usage) : event.usage;
    const serviceMs = core.serviceMs(engine.id, wallMs, usage);
    call.serviceMs += serviceMs;
    if (part === "d") core.decodeEnded(call.key, { serviceMs, outputTokens: event.usage.completionTokens }, now);
    else core.attemptEnded(call.key, { serviceMs, ...(part === "p" ? {} : { outputTokens: event.usage.completionTokens }) }, now);
    noteFinishedSwitches();
  };

  /** The core's completed switches close their records. */
  const noteFinishedSwitches = () => {
    for (const done of core.takeFinishedRoleSwitches()) {
      const record = openSwitches.get(done.engineId);
      if (record === undefined) continue;
      record.doneMs = done.atMs;
      openSwitches.delete(done.engineId);
    }
  };

  const controlRound = () => {
    for (const engine of engines) {
      const total = engine.model.stats().generationTokens;
      const running = engine.model.numRunning;
      // Tokens made since the last round, at the engine's mean context now.
      if (core.roles.role(engine.id) === "decode" && running > 0) meter.decoded(total - engine.generatedAtRound, kvTokensOf(engine) / running);
      engine.generatedAtRound = total;
    }
    // What the pool's loop gives the controller: the core's readings (decode KV, calls waiting for prefill in its queue and at the engines) and its engines' roles and loads.
    const demand = meter.read(now, core.roleReadings());
    const decision = controller?.decide(core.roleStates(), demand, now);
    for (const roleSwitch of decision?.action === "switch" ? decision.switches : []) {
      // Overlap: it serves both sides, its new role's work from now on while its old role's requests finish in the same steps; drain: nothing new until it is empty.
      if (!core.startRoleSwitch(roleSwitch, now)) continue;
      const record: RoleSwitchRecord = { atMs: now, doneMs: undefined, mode: core.roles.switchMode(roleSwitch.engineId) ?? switchMode, ...roleSwitch };
      openSwitches.set(roleSwitch.engineId, record);
      result.switches.push(record);
      noteFinishedSwitches();
    }
    result.prefillEnginesByRound.push(engines.filter((e) => core.roles.role(e.id) === "prefill").length);
  };

  for (let next = events.pop(); next !== undefined; next = events.pop()) {
    now = next.time;
    if (now > maxSimMs) break;
    const event = next.event;
    switch (event.kind) {
      case "arrival": {
        result.programsStarted += 1;
        const tree = event.program.spec.shape.tree;
        // A tree search forks its first round at once.
        for (let b = 0; b < (tree?.forks ?? 1); b++) issue(event.program, tree === undefined ? 0 : treeCallIndex(tree, 0, b, 0));
        break;
      }
      case "issue":
        issue(event.program, event.index);
        break;
      case "pulled": {
        // The decode engine's pull ended: the prefill engine lets its copy go (vLLM frees it on the decode side's notification).
        const { call } = event;
        const prefill = call.prefillEngine;
        if (call.held !== undefined && prefill !== undefined) {
          prefill.model.releaseHeld(call.held);
          call.held = undefined;
          kick(prefill);
        }
        break;
      }
      case "wake": {
        const engine = event.engine;
        if (engine.wakeAtMs !== now) break;
        engine.wakeAtMs = undefined;
        kick(engine);
        break;
      }
      case "step": {
        const engine = event.engine;
        engine.stepping = false;
        let ended = false;
        for (const engineEvent of engine.model.finishStep()) {
          ended ||= engineEvent.type === "finished";
          onEngineEvent(engine, engineEvent);
        }
        kick(engine);
        // A slot and KV came back: a held decode or a queued call may go now.
        if (ended) schedulePump();
        break;
      }
      case "pump":
        pump();
        break;
      case "scrape":
        for (const engine of engines) readEngine(engine);
        schedulePump();
        if (result.programsFinished < config.programs.length) events.push(now + POOL_DEFAULTS.metricsIntervalMs, { kind: "scrape" });
        break;
      case "rescrape":
        event.engine.rescrapePending = false;
        readEngine(event.engine);
        schedulePump();
        break;
      case "holdBound":
        schedulePump();
        break;
      case "round":
        controlRound();
        // A switch may have given decodes an engine, or new calls one.
        schedulePump();
        // Rounds run while anything is left to do.
        if (result.programsFinished < config.programs.length) events.push(now + roundMs, { kind: "round" });
        break;
    }
  }
  result.simMs = now;
  result.kvBlocksHeldAtEnd = engines.reduce((sum, e) => sum + profile.kvBlocks - e.model.stats().kvBlocksFree, 0);
  result.kv = kvTotals(
    engines.map((e) => e.model.stats()),
    hintsSent,
    branchDropsApplied,
    planner?.keepFactor,
    core.affinityHintsDropped,
  );
  return result;
}

function kvTotals(stats: readonly EngineStats[], hintsSent: number, branchDropsApplied: number, keepFactor: number | undefined, affinityHintsDropped: number): EvolveKvTotals {
  const sum = (read: (s: EngineStats) => number) => stats.reduce((total, s) => total + read(s), 0);
  return {
    gpuHitTokens: sum((s) => s.prefixCacheHits),
    pulledTokens: sum((s) => s.remoteKvPulledTokens),
    hostHitTokens: sum((s) => s.hostHitTokens),
    recomputedTokens: sum((s) => s.recomputedTokens),
    pcieBytes: sum((s) => s.hostLoadBytes + s.hostStoreBytes),
    keepsApplied: sum((s) => s.keepsApplied),
    normalsApplied: sum((s) => s.normalsApplied),
    dropsApplied: sum((s) => s.dropsApplied),
    hintsSent,
    branchDropsApplied,
    evictedDroppedBlocks: sum((s) => s.evictedDroppedBlocks),
    evictedOrdinaryBlocks: sum((s) => s.evictedOrdinaryBlocks),
    evictedKeptBlocks: sum((s) => s.evictedKeptBlocks),
    keepFactor,
    affinityHintsDropped,
  };
}

export interface EvolveSummary {
  calls: number;
  meanE2eMs: number;
  p95E2eMs: number;
  p95TtftMs: number;
  /** Mean wait in the pool's queue (issue → dispatch to the engine that prefilled it), part of TTFT and e2e. */
  meanQueueMs: number;
  /** Calls finished per second of the run. */
  callsPerSec: number;
  outputTokensPerSec: number;
  computedPromptTokens: number;
  /** Prompt tokens decode engines computed again although the prefill's KV was handed over (EvolveCallRecord.decodeRecomputedTokens). */
  decodeRecomputedTokens: number;
  /** Split calls' mean decode-leg waits: for blocks on the decode engine, and for the KV once it had them (ms; NaN without split calls). */
  meanDecodeRoomWaitMs: number;
  meanDecodeKvWaitMs: number;
  /** Split calls whose decode no decode engine admitted at the prefill's end (held, as the pool holds it), and their mean hold (ms; NaN without holds). */
  decodeHolds: number;
  meanDecodeHeldMs: number;
  /** Those holds by the reason each was first held for (admission's, most binding first). */
  decodeHoldsByReason: Partial<Record<HoldReason, number>>;
  switches: number;
  /** The run's KV totals (whole run, every phase). */
  kv: EvolveKvTotals;
}

function countHoldReasons(held: readonly EvolveCallRecord[]): Partial<Record<HoldReason, number>> {
  const counts: Partial<Record<HoldReason, number>> = {};
  for (const reason of HOLD_REASONS) {
    const n = held.filter((c) => c.decodeHoldReason === reason).length;
    if (n > 0) counts[reason] = n;
  }
  return counts;
}

const meanOf = (values: readonly number[]): number => (values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length);

export function summarise(result: EvolveResult, phase?: number): EvolveSummary {
  const calls = result.calls.filter((c) => phase === undefined || c.phase === phase);
  const e2e = calls.map((c) => c.finishMs - c.arrivalMs);
  // Calls with a decode leg (a one-token call ends at its prefill).
  const split = calls.filter((c) => c.transferMs > 0);
  const held = calls.filter((c) => c.decodeHoldReason !== undefined);
  const ttft = calls.map((c) => c.firstTokenMs - c.arrivalMs);
  const seconds = Math.max(result.simMs, 1) / 1_000;
  return {
    calls: calls.length,
    meanE2eMs: meanOf(e2e),
    p95E2eMs: percentileOf(e2e, 0.95) ?? Number.NaN,
    p95TtftMs: percentileOf(ttft, 0.95) ?? Number.NaN,
    meanQueueMs: meanOf(calls.map((c) => c.dispatchMs - c.arrivalMs)),
    callsPerSec: calls.length / seconds,
    outputTokensPerSec: calls.reduce((sum, c) => sum + c.outputTokens, 0) / seconds,
    computedPromptTokens: calls.reduce((sum, c) => sum + c.computedPromptTokens, 0),
    decodeRecomputedTokens: calls.reduce((sum, c) => sum + c.decodeRecomputedTokens, 0),
    meanDecodeRoomWaitMs: meanOf(split.map((c) => c.decodeRoomWaitMs)),
    meanDecodeKvWaitMs: meanOf(split.map((c) => c.decodeKvWaitMs)),
    decodeHolds: held.length,
    decodeHoldsByReason: countHoldReasons(held),
    meanDecodeHeldMs: meanOf(held.map((c) => c.decodeHeldMs)),
    switches: result.switches.length,
    kv: result.kv,
  };
}
