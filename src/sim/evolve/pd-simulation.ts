import { RatioRoleController, type RatioControllerSettings } from "../../core/roles/ratio-controller.js";
import { RoleDemandMeter, type RoleWorkModel } from "../../core/roles/role-demand-meter.js";
import type { RoleCapacity, RoleController, RoleEngineState, SplitRole } from "../../core/roles/roles.js";
import { ThresholdRoleController, type ThresholdControllerSettings } from "../../core/roles/threshold-controller.js";
import { EventQueue } from "../des/event-queue.js";
import { EngineModel, type EngineEvent } from "../engine-model.js";
import { KV_LINKS, kvTransferMs } from "../kv-links.js";
import { decodeCostOf, type EngineProfile, type EngineProfileName, ENGINE_PROFILES } from "../profiles.js";
import { promptBlockHashes } from "../token-hash.js";
import { type EvolveProgram, promptOf } from "./workload.js";

/*
 * A pool of modelled engines (EngineModel: the simulated engine's own step timing and
 * KV cache) serving agent programs with fixed or evolving prefill/decode roles, in
 * virtual time (issue 13). A disaggregated call is prefilled on a prefill engine
 * (max_tokens 1: its first token, as vLLM's prefill instance answers under the KV
 * connector), its KV moved to a decode engine over the engine link
 * (kv-links.ts), imported there as cached blocks, and decoded; a mixed engine does
 * both. The role controllers are the core's (src/core/roles/); a switch drains the
 * engine's current work before it takes its new role, so no call is lost.
 *
 * Demand is measured by the core's RoleDemandMeter, as the pool measures it: each
 * call's prefill work as it is issued, its first token, the KV handed to decode, and
 * each decode engine's tokens per round at its mean context.
 *
 * Routing here is the simulator's own, for now: a program's prefill goes to the prefill
 * engine that prefilled its last call (its prefix is cached there) unless that one is
 * clearly busier, decode to the decode engine with the most free KV. The pool core
 * does not route by role yet.
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
  /** The controller's round (ms). */
  roundMs?: number;
  /** Stop here even if programs are left (ms of virtual time). */
  maxSimMs?: number;
}

export interface EvolveCallRecord {
  programId: string;
  kind: string;
  phase: number;
  arrivalMs: number;
  firstTokenMs: number;
  finishMs: number;
  promptTokens: number;
  outputTokens: number;
  /** Prompt tokens the engines computed (not found cached). */
  computedPromptTokens: number;
  /** KV moved from the prefill engine to the decode engine (ms; 0 on a mixed engine). */
  transferMs: number;
}

export interface RoleSwitchRecord {
  atMs: number;
  /** When the engine had drained and took its new role. */
  doneMs: number | undefined;
  engineId: string;
  from: SplitRole;
  to: SplitRole;
  reason: string;
}

export interface EvolveResult {
  calls: EvolveCallRecord[];
  switches: RoleSwitchRecord[];
  programsFinished: number;
  programsStarted: number;
  simMs: number;
  /** Prefill engines at each round (a fixed split's is constant). */
  prefillEnginesByRound: number[];
}

/** What a decode engine may fill: its KV, less the pool's admission headroom (90 %). */
export function roleCapacityOf(profile: EngineProfile): RoleCapacity {
  return { decodeKvTokens: profile.kvBlocks * profile.blockSize * 0.9 };
}

/** The cost model the demand meter prices work with: the profile's terms, a full batch of its max_num_seqs. */
export function roleWorkModelOf(profile: EngineProfile): RoleWorkModel {
  return { ...decodeCostOf(profile), batchSequences: profile.maxNumSeqs };
}

interface SimEngine extends RoleEngineState {
  model: EngineModel;
  stepping: boolean;
  /** The role it is draining toward. */
  next: SplitRole | undefined;
  switchRecord: RoleSwitchRecord | undefined;
  generatedAtRound: number;
}

interface CallRun {
  program: ProgramRun;
  index: number;
  prompt: string[];
  hashes: number[];
  newTokens: number;
  record: EvolveCallRecord;
}

interface ProgramRun {
  spec: EvolveProgram;
  prompt: string[] | undefined;
  lastEngine: string | undefined;
}

type SimEvent =
  | { kind: "arrival"; program: ProgramRun }
  | { kind: "issue"; program: ProgramRun; index: number }
  | { kind: "step"; engine: SimEngine }
  | { kind: "transferred"; call: CallRun }
  | { kind: "round" };

const percentileOf = (values: readonly number[], p: number): number | undefined => {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
};

export function simulateEvolvingPool(config: EvolveConfig): EvolveResult {
  const profile = ENGINE_PROFILES[config.profile];
  const link = KV_LINKS[config.profile];
  const roundMs = config.roundMs ?? 10_000;
  const maxSimMs = config.maxSimMs ?? Number.POSITIVE_INFINITY;
  const policy = config.policy;
  const split = policy.kind !== "mixed";
  const prefillAtStart = policy.kind === "mixed" ? 0 : policy.prefillEngines;
  if (split && (prefillAtStart < 1 || prefillAtStart > config.engines - 1)) {
    throw new RangeError(`a split pool of ${config.engines} engines needs 1–${config.engines - 1} prefill engines, got ${prefillAtStart}`);
  }
  const controller: RoleController | undefined =
    policy.kind === "ratio"
      ? new RatioRoleController(roleCapacityOf(profile), policy.settings)
      : policy.kind === "threshold"
        ? new ThresholdRoleController(policy.settings)
        : undefined;

  const engines: SimEngine[] = Array.from({ length: config.engines }, (_, i) => ({
    id: `engine-${i}`,
    role: !split ? "mixed" : i < prefillAtStart ? "prefill" : "decode",
    switching: false,
    load: 0,
    model: new EngineModel({ profile: config.profile }),
    stepping: false,
    next: undefined,
    switchRecord: undefined,
    generatedAtRound: 0,
  }));
  const events = new EventQueue<SimEvent>();
  const calls = new Map<string, CallRun>();
  const result: EvolveResult = { calls: [], switches: [], programsFinished: 0, programsStarted: 0, simMs: 0, prefillEnginesByRound: [] };
  // Demand measured as the pool measures it (the core's meter), on virtual time.
  const workModel = roleWorkModelOf(profile);
  const meter = new RoleDemandMeter(workModel, 0);
  const kvTokensOf = (engine: SimEngine) => engine.model.kvUsage * profile.kvBlocks * profile.blockSize;
  let now = 0;

  for (const spec of config.programs) events.push(spec.arrivalMs, { kind: "arrival", program: { spec, prompt: undefined, lastEngine: undefined } });
  if (controller !== undefined) events.push(roundMs, { kind: "round" });

  const kick = (engine: SimEngine) => {
    if (engine.stepping) return;
    const duration = engine.model.startStep(now);
    if (duration === undefined) return;
    engine.stepping = true;
    events.push(now + duration, { kind: "step", engine });
  };

  const usable = (role: SplitRole | "mixed") => engines.filter((e) => e.role === role && e.next === undefined);
  const busy = (e: SimEngine) => e.model.numRunning + e.model.numWaiting;

  /** The engine of the program's last call while it is not much busier than the least busy; else the least busy. */
  const byAffinity = (candidates: SimEngine[], program: ProgramRun, measure: (e: SimEngine) => number, slack: number): SimEngine => {
    const least = candidates.reduce((a, b) => (measure(b) < measure(a) ? b : a));
    const last = candidates.find((e) => e.id === program.lastEngine);
    return last !== undefined && measure(last) <= measure(least) + slack ? last : least;
  };

  const submit = (engine: SimEngine, id: string, call: CallRun, maxTokens: number) => {
    engine.model.submit({ id, promptTokens: call.prompt, promptBlockHashes: call.hashes, maxTokens, ignoreEos: true }, now);
    kick(engine);
  };

  const issue = (program: ProgramRun, index: number) => {
    const prompt = promptOf(program.spec, index, program.prompt);
    const newTokens = prompt.length - (program.prompt?.length ?? 0);
    program.prompt = prompt;
    const record: EvolveCallRecord = {
      programId: program.spec.id,
      kind: program.spec.kind,
      phase: program.spec.phase,
      arrivalMs: now,
      firstTokenMs: Number.NaN,
      finishMs: Number.NaN,
      promptTokens: prompt.length,
      outputTokens: program.spec.shape.outputTokens,
      computedPromptTokens: 0,
      transferMs: 0,
    };
    const call: CallRun = { program, index, prompt, hashes: promptBlockHashes(prompt, profile.blockSize), newTokens, record };
    const key = `${program.spec.id}#${index}`;
    calls.set(key, call);
    meter.prefillQueued(key, newTokens, prompt.length - newTokens);
    if (!split) {
      const engine = byAffinity(usable("mixed"), program, busy, 4);
      program.lastEngine = engine.id;
      submit(engine, `${key}/m`, call, record.outputTokens);
      return;
    }
    const engine = byAffinity(usable("prefill"), program, (e) => e.model.numWaiting, 2);
    program.lastEngine = engine.id;
    submit(engine, `${key}/p`, call, 1);
  };

  const callDone = (call: CallRun) => {
    call.record.finishMs = now;
    meter.forget(`${call.program.spec.id}#${call.index}`);
    result.calls.push(call.record);
    calls.delete(`${call.program.spec.id}#${call.index}`);
    if (call.index + 1 < call.program.spec.shape.calls) {
      events.push(now + call.program.spec.shape.toolMs, { kind: "issue", program: call.program, index: call.index + 1 });
    } else {
      result.programsFinished += 1;
    }
  };

  const onEngineEvent = (event: EngineEvent) => {
    const [key, part] = event.requestId.split("/") as [string, string];
    const call = calls.get(key);
    if (call === undefined) return;
    if (event.type === "first_token" && part !== "d") {
      call.record.firstTokenMs = event.atMs;
      meter.prefillDone(key, event.atMs - call.record.arrivalMs);
    }
    if (event.type === "first_token" && part === "d") meter.decodeStarted(key);
    if (event.type !== "finished") return;
    if (part !== "d") call.record.computedPromptTokens += event.usage.promptTokens - event.usage.cachedTokens;
    if (part !== "p" && event.timing.tpotMs !== undefined) meter.interToken(event.timing.tpotMs);
    if (part === "p" && call.record.outputTokens > 1) {
      const ms = kvTransferMs(link, call.prompt.length, "engine");
      call.record.transferMs = ms;
      meter.decodeQueued(key, call.prompt.length);
      events.push(now + ms, { kind: "transferred", call });
      return;
    }
    callDone(call);
  };

  const finishSwitchIfDrained = (engine: SimEngine) => {
    if (engine.next === undefined || !engine.model.isIdle || engine.stepping) return;
    engine.role = engine.next;
    engine.next = undefined;
    engine.switching = false;
    if (engine.switchRecord) engine.switchRecord.doneMs = now;
    engine.switchRecord = undefined;
  };

  const controlRound = () => {
    const prefill = engines.filter((e) => e.role === "prefill");
    const decode = engines.filter((e) => e.role === "decode");
    for (const engine of engines) {
      const total = engine.model.stats().generationTokens;
      const running = engine.model.numRunning;
      // Tokens made since the last round, at the engine's mean context now.
      if (engine.role === "decode" && running > 0) meter.decoded(total - engine.generatedAtRound, kvTokensOf(engine) / running);
      engine.generatedAtRound = total;
      engine.load = busy(engine);
    }
    const demand = meter.read(now, {
      decodeKvTokens: decode.reduce((sum, e) => sum + kvTokensOf(e), 0),
      prefillQueue: prefill.reduce((sum, e) => sum + e.model.numWaiting, 0),
      decodeKvUsage: decode.length === 0 ? 0 : decode.reduce((sum, e) => sum + e.model.kvUsage, 0) / decode.length,
    });
    const decision = controller?.decide(engines, demand, now);
    for (const roleSwitch of decision?.action === "switch" ? decision.switches : []) {
      const engine = engines.find((e) => e.id === roleSwitch.engineId);
      if (engine === undefined) continue;
      engine.next = roleSwitch.to;
      engine.switching = true;
      const record: RoleSwitchRecord = { atMs: now, doneMs: undefined, ...roleSwitch };
      engine.switchRecord = record;
      result.switches.push(record);
      finishSwitchIfDrained(engine);
    }
    result.prefillEnginesByRound.push(engines.filter((e) => e.role === "prefill").length);
  };

  for (let next = events.pop(); next !== undefined; next = events.pop()) {
    now = next.time;
    if (now > maxSimMs) break;
    const event = next.event;
    switch (event.kind) {
      case "arrival":
        result.programsStarted += 1;
        issue(event.program, 0);
        break;
      case "issue":
        issue(event.program, event.index);
        break;
      case "transferred": {
        const candidates = usable("decode");
        const engine = candidates.reduce((a, b) => (b.model.kvUsage < a.model.kvUsage || (b.model.kvUsage === a.model.kvUsage && busy(b) < busy(a)) ? b : a));
        engine.model.importKv(event.call.hashes);
        submit(engine, `${event.call.program.spec.id}#${event.call.index}/d`, event.call, event.call.record.outputTokens - 1);
        break;
      }
      case "step": {
        const engine = event.engine;
        engine.stepping = false;
        for (const engineEvent of engine.model.finishStep()) onEngineEvent(engineEvent);
        kick(engine);
        finishSwitchIfDrained(engine);
        break;
      }
      case "round":
        controlRound();
        // Rounds run while anything is left to do.
        if (result.programsFinished < config.programs.length) events.push(now + roundMs, { kind: "round" });
        break;
    }
  }
  result.simMs = now;
  return result;
}

export interface EvolveSummary {
  calls: number;
  meanE2eMs: number;
  p95E2eMs: number;
  p95TtftMs: number;
  /** Calls finished per second of the run. */
  callsPerSec: number;
  outputTokensPerSec: number;
  computedPromptTokens: number;
  switches: number;
}

export function summarise(result: EvolveResult, phase?: number): EvolveSummary {
  const calls = result.calls.filter((c) => phase === undefined || c.phase === phase);
  const e2e = calls.map((c) => c.finishMs - c.arrivalMs);
  const ttft = calls.map((c) => c.firstTokenMs - c.arrivalMs);
  const seconds = Math.max(result.simMs, 1) / 1_000;
  return {
    calls: calls.length,
    meanE2eMs: e2e.length === 0 ? Number.NaN : e2e.reduce((a, b) => a + b, 0) / e2e.length,
    p95E2eMs: percentileOf(e2e, 0.95) ?? Number.NaN,
    p95TtftMs: percentileOf(ttft, 0.95) ?? Number.NaN,
    callsPerSec: calls.length / seconds,
    outputTokensPerSec: calls.reduce((sum, c) => sum + c.outputTokens, 0) / seconds,
    computedPromptTokens: calls.reduce((sum, c) => sum + c.computedPromptTokens, 0),
    switches: result.switches.length,
  };
}
