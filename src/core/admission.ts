/*
 * Admission: whether an engine may take one more call now, by what binds it.
 *
 * An engine is limited by KV room and by the time of its batch step, not by a count of
 * calls. The pool keeps its own account of what it has sent each engine and projects:
 *
 * - KV: the tokens the engine's running calls will hold at their peak. A program's
 *   calls in flight on one engine share their conversation prefix, so a program counts
 *   once with its longest prompt there, plus each call's expected output. A candidate
 *   adds its context beyond the prefix its program already holds there, plus its own
 *   expected output. Between scrapes this moves exactly with what the pool sends and
 *   what finishes; each scrape adds what the engine reports using beyond the account
 *   (other clients, outputs longer than expected), never less. Admit while the
 *   projection stays within `kvTarget` of the capacity.
 * - Step time: the decode step the batch would run with the candidate in it, from the
 *   engine's decode cost model (weights read once per step, the KV read of every
 *   sequence's context, a cost per sequence): admit while it stays within
 *   `stepTargetMs`. Long contexts bind here before they fill the cache.
 *
 * The count cap (EngineState.maxInFlight) and the engine's own waiting queue
 * (SaturationSettings) stay as safety limits. Expected output: the program's recent
 * calls' mean (an exponential average), else the pool's, capped by the call's
 * max_tokens when known; the actual length is never read (no oracle).
 *
 * Pure and deterministic: the pool and the simulator feed the same events.
 */

import { backedUp, type EngineState, metricsSaturated, type SaturationSettings } from "./engines.js";

export interface AdmissionSettings {
  /** Admit while projected KV stays within this share of capacity (0 < kvTarget <= 1). */
  kvTarget: number;
  /**
   * Admit while the projected decode step stays within this many ms; applies to
   * engines with a decode cost model. Undefined: `stepTargetFactor` × the model's
   * weight-read floor.
   */
  stepTargetMs?: number | undefined;
  /** The default step target as a multiple of the decode floor (>= 1; Infinity: no step limit). */
  stepTargetFactor: number;
  /** Expected output of a call before any call of its program or the pool has finished. */
  defaultOutputTokens: number;
  /** Weight of the newest finished call in the output averages (0 < w <= 1). */
  outputAverageWeight: number;
}

/** The decode part of an engine's step time, linear in its terms (sim/timing.ts has the full step). */
export interface DecodeCostModel {
  /** Weight-read floor of every step. */
  decodeBaseMs: number;
  /** Compute per token processed in the step (one per decoding sequence). */
  perTokenMs: number;
  /** KV read per token of every sequence's context. */
  perContextTokenMs: number;
  perSequenceMs: number;
  /** Prefill attention per (new token, earlier token) pair; absent: 0. Used for a call's standalone time, not for admission. */
  attentionMsPerTokenPair?: number | undefined;
}

export type HoldReason = "unhealthy" | "count" | "engine-backlog" | "kv" | "step-time";

/** Most binding first: the reason a held call is counted under when engines disagree. */
export const HOLD_REASONS: readonly HoldReason[] = Object.freeze(["kv", "step-time", "count", "engine-backlog", "unhealthy"]);

export interface AdmissionCandidate {
  callId: string;
  programId: string;
  promptTokens: number;
  /** The call's max_tokens when the pool knows it: the expected output never exceeds it. */
  maxTokens?: number | undefined;
}

export function validateAdmissionSettings(s: AdmissionSettings): void {
  if (!(s.kvTarget > 0 && s.kvTarget <= 1)) throw new RangeError(`kvTarget must be in (0, 1], got ${s.kvTarget}`);
  if (s.stepTargetMs !== undefined && !(s.stepTargetMs > 0)) throw new RangeError(`stepTargetMs must be > 0, got ${s.stepTargetMs}`);
  if (!(s.stepTargetFactor >= 1)) throw new RangeError(`stepTargetFactor must be >= 1, got ${s.stepTargetFactor}`);
  if (!(Number.isInteger(s.defaultOutputTokens) && s.defaultOutputTokens >= 1)) {
    throw new RangeError(`defaultOutputTokens must be an integer >= 1, got ${s.defaultOutputTokens}`);
  }
  if (!(s.outputAverageWeight > 0 && s.outputAverageWeight <= 1)) {
    throw new RangeError(`outputAverageWeight must be in (0, 1], got ${s.outputAverageWeight}`);
  }
}

export function validateDecodeCostModel(m: DecodeCostModel): void {
  for (const [name, value] of Object.entries(m)) {
    if (value === undefined) continue;
    if (!(Number.isFinite(value) && value >= 0)) throw new RangeError(`decode cost ${name} must be a finite number >= 0, got ${String(value)}`);
  }
}

/** What an engine reported a call used. */
export interface CallTokens {
  promptTokens: number;
  /** Of the prompt, found in the engine's prefix cache. */
  cachedTokens: number;
  completionTokens: number;
}

/**
 * A call's engine time had it run alone (ms), by the engine's step formula: one prefill
 * step of its uncached prompt after the cached part, then one decode step per further
 * output token (decode cost is linear in the context, so those cost exactly that many
 * steps at the mean context). The simulator's step formula (sim/timing.ts) gives the same.
 */
export function standaloneCallMs(m: DecodeCostModel, tokens: CallTokens): number {
  const prompt = Math.max(0, tokens.promptTokens);
  const cached = Math.min(prompt, Math.max(0, tokens.cachedTokens));
  const fresh = prompt - cached;
  const prefill =
    Math.max(m.decodeBaseMs, m.perTokenMs * (fresh + 1)) + (m.attentionMsPerTokenPair ?? 0) * fresh * (cached + fresh / 2) + m.perContextTokenMs * prompt + m.perSequenceMs;
  const decodes = tokens.completionTokens - 1;
  if (decodes <= 0) return prefill;
  return prefill + decodes * decodeStepMs(m, 1, prompt + tokens.completionTokens / 2);
}

/** One decode step of `sequences` sequences holding `contextTokens` tokens of context in all. */
export function decodeStepMs(m: DecodeCostModel, sequences: number, contextTokens: number): number {
  if (sequences <= 0) return 0;
  return Math.max(m.decodeBaseMs, m.perTokenMs * sequences) + m.perContextTokenMs * contextTokens + m.perSequenceMs * sequences;
}

interface SentCall {
  programId: string;
  promptTokens: number;
  outputTokens: number;
}

/** The pool's account of one engine. */
class EngineAccount {
  capacityTokens: number | undefined;
  costModel: DecodeCostModel | undefined;
  readonly calls = new Map<string, SentCall>();
  /** Per program: the prompt sizes of its calls in flight here (they share a prefix). */
  readonly programs = new Map<string, number[]>();
  /** Σ over programs of their longest prompt here + Σ over calls of expected output. */
  committedTokens = 0;
  /** What the last scrape showed the engine using beyond the account (>= 0). */
  unexplainedTokens = 0;

  constructor(capacityTokens: number | undefined, costModel: DecodeCostModel | undefined) {
    this.capacityTokens = capacityTokens;
    this.costModel = costModel;
  }

  /** Tokens of `programId`'s prefix already held here by its calls in flight. */
  residentPrefix(programId: string): number {
    const prompts = this.programs.get(programId);
    return prompts === undefined ? 0 : Math.max(...prompts);
  }

  add(callId: string, call: SentCall): void {
    const before = this.residentPrefix(call.programId);
    const prompts = this.programs.get(call.programId);
    if (prompts === undefined) this.programs.set(call.programId, [call.promptTokens]);
    else prompts.push(call.promptTokens);
    this.calls.set(callId, call);
    this.committedTokens += Math.max(0, call.promptTokens - before) + call.outputTokens;
  }

  remove(callId: string): void {
    const call = this.calls.get(callId);
    if (call === undefined) return;
    this.calls.delete(callId);
    const before = this.residentPrefix(call.programId);
    const prompts = this.programs.get(call.programId) as number[];
    prompts.splice(prompts.indexOf(call.promptTokens), 1);
    if (prompts.length === 0) this.programs.delete(call.programId);
    const after = this.residentPrefix(call.programId);
    this.committedTokens = Math.max(0, this.committedTokens - (before - after) - call.outputTokens);
  }
}

/** Bound on the programs whose output average is remembered (oldest forgotten first). */
const MAX_REMEMBERED_PROGRAMS = 50_000;

export interface EngineAdmissionSetup {
  id: string;
  /** KV capacity in tokens; unknown: the KV rule falls back to the scraped-use limit (SaturationSettings.maxKvUsage). */
  capacityTokens?: number | undefined;
  /** Unknown: no step-time rule for this engine. */
  costModel?: DecodeCostModel | undefined;
}

export class Admission {
  readonly settings: AdmissionSettings;
  readonly #engines = new Map<string, EngineAccount>();
  readonly #programOutput = new Map<string, number>();
  #poolOutput: number | undefined;

  constructor(settings: AdmissionSettings, engines: readonly EngineAdmissionSetup[]) {
    validateAdmissionSettings(settings);
    this.settings = { ...settings };
    for (const engine of engines) this.addEngine(engine);
  }

  addEngine(setup: EngineAdmissionSetup): void {
    if (this.#engines.has(setup.id)) throw new RangeError(`engine ${setup.id} is already admitted for`);
    if (setup.capacityTokens !== undefined && !(setup.capacityTokens > 0)) {
      throw new RangeError(`engine ${setup.id}: KV capacity must be > 0 tokens, got ${setup.capacityTokens}`);
    }
    if (setup.costModel !== undefined) validateDecodeCostModel(setup.costModel);
    this.#engines.set(setup.id, new EngineAccount(setup.capacityTokens, setup.costModel));
  }

  /** The engine's metrics stated its capacity (used unless it was configured). */
  setCapacity(engineId: string, capacityTokens: number): void {
    if (!(capacityTokens > 0)) return;
    this.#account(engineId).capacityTokens = capacityTokens;
  }

  /** The engine's KV capacity (tokens): configured, else stated by its metrics; undefined: neither yet. */
  capacityTokens(engineId: string): number | undefined {
    return this.#account(engineId).capacityTokens;
  }

  /** The engine's cost terms, when it has them. */
  costModel(engineId: string): DecodeCostModel | undefined {
    return this.#account(engineId).costModel;
  }

  /** The step limit applied to an engine: configured, else the factor × its decode floor; undefined without a cost model. */
  stepTargetMs(engineId: string): number | undefined {
    const model = this.#account(engineId).costModel;
    if (model === undefined) return undefined;
    return this.settings.stepTargetMs ?? this.settings.stepTargetFactor * model.decodeBaseMs;
  }

  expectedOutputTokens(candidate: Pick<AdmissionCandidate, "programId" | "maxTokens">): number {
    const mean = this.#programOutput.get(candidate.programId) ?? this.#poolOutput ?? this.settings.defaultOutputTokens;
    const expected = Math.max(1, Math.round(mean));
    return candidate.maxTokens === undefined ? expected : Math.min(expected, Math.max(1, candidate.maxTokens));
  }

  /** KV tokens the engine will hold at peak, with `candidate` added when given. */
  projectedKvTokens(engineId: string, candidate?: AdmissionCandidate): number {
    const account = this.#account(engineId);
    const base = account.committedTokens + account.unexplainedTokens;
    if (candidate === undefined) return base;
    return base + Math.max(0, candidate.promptTokens - account.residentPrefix(candidate.programId)) + this.expectedOutputTokens(candidate);
  }

  /** Projected decode step (ms) with `candidate` added; undefined without a cost model. */
  projectedStepMs(engine: Pick<EngineState, "id" | "inFlight">, candidate?: AdmissionCandidate): number | undefined {
    const model = this.#account(engine.id).costModel;
    if (model === undefined) return undefined;
    const sequences = engine.inFlight + (candidate === undefined ? 0 : 1);
    return decodeStepMs(model, sequences, this.projectedKvTokens(engine.id, candidate));
  }

  /** Why `engine` may not take `candidate` now, or undefined when it may. */
  holdReason(engine: EngineState, candidate: AdmissionCandidate, saturation: SaturationSettings): HoldReason | undefined {
    if (!engine.healthy) return "unhealthy";
    if (engine.inFlight >= engine.maxInFlight) return "count";
    if (backedUp(engine, saturation)) return "engine-backlog";
    const account = this.#account(engine.id);
    if (account.capacityTokens === undefined) {
      if (metricsSaturated({ waiting: 0, kvUsage: engine.kvUsage }, saturation)) return "kv";
    } else if (engine.inFlight > 0 && this.projectedKvTokens(engine.id, candidate) > this.settings.kvTarget * account.capacityTokens) {
      // An idle engine always takes one call: a context bigger than the target still has to run somewhere.
      return "kv";
    }
    const target = this.stepTargetMs(engine.id);
    if (target !== undefined && engine.inFlight > 0) {
      const step = this.projectedStepMs(engine, candidate) as number;
      if (step > target) return "step-time";
    }
    return undefined;
  }

  /** The call went to the engine. */
  sent(engineId: string, candidate: AdmissionCandidate): void {
    this.#account(engineId).add(candidate.callId, {
      programId: candidate.programId,
      promptTokens: candidate.promptTokens,
      outputTokens: this.expectedOutputTokens(candidate),
    });
  }

  /** The call left the engine; `outputTokens` is what it generated, when known (it teaches the averages). */
  finished(engineId: string, callId: string, outputTokens?: number): void {
    const account = this.#account(engineId);
    const call = account.calls.get(callId);
    account.remove(callId);
    if (call === undefined || outputTokens === undefined || !(outputTokens >= 0)) return;
    const w = this.settings.outputAverageWeight;
    const before = this.#programOutput.get(call.programId);
    this.#programOutput.delete(call.programId);
    this.#programOutput.set(call.programId, before === undefined ? outputTokens : before + w * (outputTokens - before));
    if (this.#programOutput.size > MAX_REMEMBERED_PROGRAMS) {
      const oldest = this.#programOutput.keys().next().value;
      if (oldest !== undefined) this.#programOutput.delete(oldest);
    }
    this.#poolOutput = this.#poolOutput === undefined ? outputTokens : this.#poolOutput + w * (outputTokens - this.#poolOutput);
  }

  /** A metrics reading: KV use (0..1) the engine reported; what the account does not explain is added until the next one. */
  scraped(engineId: string, kvUsage: number, capacityTokens?: number): void {
    if (capacityTokens !== undefined) this.setCapacity(engineId, capacityTokens);
    const account = this.#account(engineId);
    if (account.capacityTokens === undefined || !Number.isFinite(kvUsage)) return;
    account.unexplainedTokens = Math.max(0, kvUsage * account.capacityTokens - account.committedTokens);
  }

  /** Calls the account holds for an engine (tests, inspection). */
  callsOn(engineId: string): number {
    return this.#account(engineId).calls.size;
  }

  #account(engineId: string): EngineAccount {
    const account = this.#engines.get(engineId);
    if (account === undefined) throw new RangeError(`no admission account for engine ${engineId}`);
    return account;
  }
}
