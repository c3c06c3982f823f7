import { isKvRetentionTag, type KvRetentionHint, MAX_KV_KEEP_MS } from "../../protocol/kv-retention.js";
import { RatioWindow } from "./ratio-window.js";

/*
 * Branch-aware KV retention (issue 13), pure: from what the pool knows of its programs,
 * how each engine should rank a context's KV for eviction (protocol/kv-retention.ts).
 * A context is one thread of a program at one context generation (the edge bumps the
 * generation when a call no longer extends the thread's previous one:
 * core/recognition/context-generation.ts), tagged `program:thread:generation`.
 *
 * - keep, while the program waits on a tool and TAO's readiness predictor says when it
 *   comes back: the current context of each thread its last turn used, on the engines
 *   that hold it, until the predicted return with a margin (at most MAX_KV_KEEP_MS). A
 *   tool event that moves the prediction keeps again with the new duration. The margin
 *   is learned: each program's next call tells how long its wait really was, and a keep
 *   lasts the predicted wait × a high quantile of recent actual ÷ predicted ratios
 *   (bounded), so a predictor that runs late gets longer keeps and an exact one short
 *   ones; until enough waits are seen, a fixed margin is added.
 * - keep, on a split call's prefill engine, the context its prefill just computed, through the
 *   expected transfer and decode (× handoffKeepFactor): the prefill engine freed those
 *   blocks when its one token was out, but the call is not done with them (the decode
 *   can fail and recompute there, and the program's next call is routed back there by
 *   its prefix), and where every waiting context is kept they would be the first to go.
 * - normal, when a call of that context is dispatched again (it is in use; recency rules).
 * - drop, for a context the program replaced: a thread's older generation once a newer one
 *   arrives, every context of a thread that ended (a branch abandoned or merged), and
 *   every context of a program that ended. A call of an ended thread's context that comes
 *   after all (a guess of the edge gone wrong, a late call) withdraws the drop: "normal".
 *
 * Engines hold a context where a call of it ran; hints go only there. Durations, never
 * instants, so engines on their own clocks apply them. Memory: a program leaves when it
 * ends, or once idle (no live call, no keep) for `forgetAfterMs`.
 */

export interface RetentionSettings {
  /** Added to the predicted return while the margin is not learned (too few waits seen, or learning off). */
  keepMarginMs: number;
  /** Learn the margin from observed waits (false: always the fixed keepMarginMs). */
  learnKeepMargin: boolean;
  /** Which quantile of actual ÷ predicted wait a learned keep covers. */
  keepRatioQuantile: number;
  /** A learned keep lasts at most the prediction × this (and at least × 1). */
  maxKeepFactor: number;
  /** Added to a learned keep: the call's own trip to the pool after the tool returns. */
  learnedMarginMs: number;
  /** Waits remembered for the quantile (the most recent). */
  ratioWindow: number;
  /** Waits seen before the learned margin replaces the fixed one. */
  minRatioSamples: number;
  /** A split call's prefill copy is kept this many times its expected transfer and decode. */
  handoffKeepFactor: number;
  /**
   * Keep a decode engine's copy through a tool wait too. Off: the program's next call is
   * prefilled on a prefill engine, which computes (or reloads) its prompt there, so the
   * decode copy would save at most the KV transfer while holding the decode side's KV
   * (bench:evolve --only kv).
   */
  keepHandedOverCopies: boolean;
  /** Longest keep (a longer one is a prediction gone wrong, not a tool wait). */
  maxKeepMs: number;
  /** An idle program is forgotten this long after its last call or keep ended. */
  forgetAfterMs: number;
}

export const DEFAULT_RETENTION_SETTINGS: RetentionSettings = {
  keepMarginMs: 2_000,
  learnKeepMargin: true,
  keepRatioQuantile: 0.9,
  maxKeepFactor: 3,
  learnedMarginMs: 250,
  ratioWindow: 256,
  minRatioSamples: 16,
  handoffKeepFactor: 1.5,
  keepHandedOverCopies: false,
  maxKeepMs: MAX_KV_KEEP_MS,
  forgetAfterMs: 15 * 60_000,
};

/** The context a call belongs to. */
export interface ContextRef {
  programId: string;
  threadId: string;
  generation: number;
}

/** One hint for one engine. */
export interface EngineRetentionHint {
  engineId: string;
  hint: KvRetentionHint;
}

/** What the planner knows of one thread's current context (inspection). */
export interface ContextInspection {
  threadId: string;
  generation: number;
  /** Engines that hold it. */
  engines: string[];
  /** Kept until then (the caller's clock); undefined: not kept. */
  keptUntil: number | undefined;
}

/** A context's tag, or undefined when its IDs cannot form one (KvRetentionTag: then it is not tagged). */
export function contextTag(ref: ContextRef): string | undefined {
  const tag = `${ref.programId}:${ref.threadId}:${ref.generation}`;
  return isKvRetentionTag(tag) ? tag : undefined;
}

interface TrackedThread {
  generation: number;
  /** Engines a call of the current generation ran on. */
  engines: Set<string>;
  /** Engines handed a copy of the current generation's KV (a split call's decode engine): hints reach them, keeps only with keepHandedOverCopies. */
  copies: Set<string>;
  /** Calls of the thread dispatched and not yet ended (of any generation). */
  live: number;
  /** The current context is kept until then (pool clock); undefined: not kept. */
  keptUntil: number | undefined;
  /** When a call of the thread last ended; undefined while none has. */
  lastEndedAt: number | undefined;
  /** The thread ended at this generation: its context was dropped on these engines. */
  ended: { generation: number; droppedOn: Set<string> } | undefined;
  /**
   * Its context's tag once made (#tagOf; null: the IDs form none), undefined before: a
   * thread's object is replaced when its generation changes, so this is the current one's.
   */
  tag: string | null | undefined;
}

/**
 * A tracked thread's context tag, made once per thread object (its generation's): a
 * pool's call is hinted at its start and its end, and the tag's string and its check
 * (the KvRetentionTag regex) were made again at each.
 */
function tagOf(programId: string, threadId: string, thread: TrackedThread): string | undefined {
  if (thread.tag === undefined) thread.tag = contextTag({ programId, threadId, generation: thread.generation }) ?? null;
  return thread.tag ?? undefined;
}

interface TrackedProgram {
  threads: Map<string, TrackedThread>;
  lastActiveAt: number;
  /** Calls of the program dispatched and not yet ended. */
  live: number;
  /** When its current turn began: the first dispatch after it had nothing running. */
  turnStartedAt: number;
  /** The tool wait in progress, as last predicted: when the prediction was made and the wait it predicted. */
  wait: { predictedAt: number; predictedMs: number } | undefined;
}

/** A prediction shorter than this teaches nothing about the predictor's error (its ratio is noise). */
const MIN_LEARNING_PREDICTION_MS = 100;

const newThread = (generation: number): TrackedThread => ({
  generation,
  engines: new Set(),
  copies: new Set(),
  live: 0,
  keptUntil: undefined,
  lastEndedAt: undefined,
  ended: undefined,
  tag: undefined,
});

/** Every engine holding the thread's current context: where it ran and where it was handed. */
function holdersOf(thread: TrackedThread): Set<string> {
  return thread.copies.size === 0 ? new Set(thread.engines) : new Set([...thread.engines, ...thread.copies]);
}

export function validateRetentionSettings(settings: RetentionSettings): void {
  if (!(settings.keepMarginMs >= 0)) throw new RangeError(`keepMarginMs must be >= 0, got ${settings.keepMarginMs}`);
  if (!(settings.maxKeepMs > 0 && settings.maxKeepMs <= MAX_KV_KEEP_MS)) {
    throw new RangeError(`maxKeepMs must be in (0, ${MAX_KV_KEEP_MS}], got ${settings.maxKeepMs}`);
  }
  if (!(settings.forgetAfterMs > 0)) throw new RangeError(`forgetAfterMs must be > 0, got ${settings.forgetAfterMs}`);
  if (!(settings.keepRatioQuantile > 0 && settings.keepRatioQuantile <= 1)) throw new RangeError(`keepRatioQuantile must be in (0, 1], got ${settings.keepRatioQuantile}`);
  if (!(settings.maxKeepFactor >= 1 && Number.isFinite(settings.maxKeepFactor))) throw new RangeError(`maxKeepFactor must be a finite number >= 1, got ${settings.maxKeepFactor}`);
  if (!(settings.learnedMarginMs >= 0 && Number.isFinite(settings.learnedMarginMs))) throw new RangeError(`learnedMarginMs must be a finite number >= 0, got ${settings.learnedMarginMs}`);
  if (!(settings.handoffKeepFactor >= 0 && Number.isFinite(settings.handoffKeepFactor))) throw new RangeError(`handoffKeepFactor must be a finite number >= 0, got ${settings.handoffKeepFactor}`);
  if (!(Number.isInteger(settings.ratioWindow) && settings.ratioWindow >= 1)) throw new RangeError(`ratioWindow must be a positive integer, got ${settings.ratioWindow}`);
  if (!(Number.isInteger(settings.minRatioSamples) && settings.minRatioSamples >= 1 && settings.minRatioSamples <= settings.ratioWindow)) {
    throw new RangeError(`minRatioSamples must be an integer in [1, ratioWindow], got ${settings.minRatioSamples}`);
  }
}

/** prune() sweeps at most this often (ms of the caller's clock): it is called on every engine reading. */
const PRUNE_INTERVAL_MS = 5_000;

export class RetentionPlanner {
  readonly #settings: RetentionSettings;
  readonly #programs = new Map<string, TrackedProgram>();
  readonly #waitRatios: RatioWindow;
  #prunedAt = Number.NEGATIVE_INFINITY;

  constructor(settings: RetentionSettings = DEFAULT_RETENTION_SETTINGS) {
    validateRetentionSettings(settings);
    this.#settings = settings;
    this.#waitRatios = new RatioWindow(settings.ratioWindow);
  }

  get programCount(): number {
    return this.#programs.size;
  }

  /** Tool waits whose actual length was observed (at most ratioWindow are remembered). */
  get observedWaits(): number {
    return this.#waitRatios.size;
  }

  /**
   * What a keep multiplies the predicted wait by: the keepRatioQuantile of the observed
   * actual ÷ predicted ratios, within [1, maxKeepFactor]; undefined while the fixed
   * margin applies (learning off, or fewer than minRatioSamples waits seen).
   */
  get keepFactor(): number | undefined {
    const settings = this.#settings;
    if (!settings.learnKeepMargin || this.#waitRatios.size < settings.minRatioSamples) return undefined;
    const quantile = this.#waitRatios.quantile(settings.keepRatioQuantile) ?? 1;
    return Math.min(settings.maxKeepFactor, Math.max(1, quantile));
  }

  /** How long to keep a context for a wait predicted to last `predictedMs` (may be <= 0: keep nothing). */
  keepMsFor(predictedMs: number): number {
    const factor = this.keepFactor;
    const keepMs = factor === undefined ? predictedMs + this.#settings.keepMarginMs : Math.max(0, predictedMs) * factor + this.#settings.learnedMarginMs;
    return Math.min(this.#settings.maxKeepMs, keepMs);
  }

  /**
   * A call arrived. A generation newer than its thread's drops the older context where
   * it is held; an older one (a late call) changes nothing.
   */
  callArrived(ref: ContextRef, now: number): EngineRetentionHint[] {
    const program = this.#program(ref.programId, now);
    this.#waitEnded(program, now);
    const thread = program.threads.get(ref.threadId);
    if (thread === undefined) {
      program.threads.set(ref.threadId, newThread(ref.generation));
      return [];
    }
    if (ref.generation <= thread.generation) return [];
    const hints = this.#hints(ref.programId, ref.threadId, thread, "drop");
    program.threads.set(ref.threadId, { ...newThread(ref.generation), live: thread.live, lastEndedAt: thread.lastEndedAt });
    return hints;
  }

  /**
   * A call of the context was dispatched to `engineId` (each dispatch is ended by one
   * callEnded): the engine holds the context now, and a keep of it is withdrawn.
   */
  callStarted(ref: ContextRef, engineId: string, now: number): EngineRetentionHint[] {
    const program = this.#program(ref.programId, now);
    let thread = program.threads.get(ref.threadId);
    if (thread === undefined) {
      // Its arrival was not seen: the thread starts here.
      thread = newThread(ref.generation);
      program.threads.set(ref.threadId, thread);
    }
    if (program.live === 0) program.turnStartedAt = now;
    program.live += 1;
    thread.live += 1;
    // An older generation's late call: its context is not the thread's any more.
    if (ref.generation !== thread.generation) return [];
    if (thread.ended !== undefined) return this.#reopened(ref, thread, engineId);
    const kept = thread.keptUntil !== undefined && thread.keptUntil > now;
    thread.keptUntil = undefined;
    // The engines that held the kept context hear "normal"; the one it runs on now holds it too.
    const hints = kept ? this.#hints(ref.programId, ref.threadId, thread, "normal") : [];
    thread.engines.add(engineId);
    return hints;
  }

  /** The engine holds the context too (a split call's decode engine, handed the prefill's KV). */
  heldOn(ref: ContextRef, engineId: string): void {
    const thread = this.#programs.get(ref.programId)?.threads.get(ref.threadId);
    if (thread !== undefined && thread.generation === ref.generation) thread.copies.add(engineId);
  }

  /**
   * A split call's prefill on `prefillEngineId` is done and its KV handed on (to a decode
   * engine, which then holds the context too: heldOn); the decode is expected to end in
   * `expectedMs` (the transfer and the decode of its output). The prefill engine keeps its
   * copy through that, × handoffKeepFactor; the call's end then keeps it for a tool wait
   * (toolWait) or drops it (programEnded), and the context's next call withdraws it.
   */
  prefillHandedOff(ref: ContextRef, prefillEngineId: string, expectedMs: number, now: number): EngineRetentionHint[] {
    const thread = this.#programs.get(ref.programId)?.threads.get(ref.threadId);
    if (thread === undefined || thread.generation !== ref.generation || !thread.engines.has(prefillEngineId)) return [];
    const keepMs = Math.ceil(Math.min(this.#settings.maxKeepMs, this.#settings.handoffKeepFactor * expectedMs));
    const tag = contextTag(ref);
    if (!(keepMs > 0) || tag === undefined) return [];
    thread.keptUntil = Math.max(thread.keptUntil ?? Number.NEGATIVE_INFINITY, now + keepMs);
    return [{ engineId: prefillEngineId, hint: { action: "keep", tag, keep_ms: keepMs } }];
  }

  /** A dispatched call of the context ended (answered, failed or abandoned). */
  callEnded(ref: ContextRef, now: number): void {
    const program = this.#programs.get(ref.programId);
    const thread = program?.threads.get(ref.threadId);
    if (program === undefined || thread === undefined) return;
    program.lastActiveAt = now;
    program.live = Math.max(0, program.live - 1);
    thread.live = Math.max(0, thread.live - 1);
    thread.lastEndedAt = now;
  }

  /**
   * The program waits on tools and TAO predicts its next call at `readyAt`: the current
   * context of each thread its last turn used (a call of it ended since the turn began),
   * that no call uses now, is kept until then plus the margin. A branch the program did
   * not touch in that turn is not kept. A prediction already past (or no engine holding
   * the context) keeps nothing.
   */
  toolWait(programId: string, readyAt: number, now: number): EngineRetentionHint[] {
    const program = this.#programs.get(programId);
    if (program === undefined) return [];
    const predictedMs = readyAt - now;
    // The latest prediction is the one the wait's real length is held against (a tool event moved it).
    program.wait = predictedMs >= MIN_LEARNING_PREDICTION_MS ? { predictedAt: now, predictedMs } : undefined;
    const keepMs = this.keepMsFor(predictedMs);
    if (!(keepMs > 0)) return [];
    const rounded = Math.ceil(keepMs);
    const hints: EngineRetentionHint[] = [];
    for (const [threadId, thread] of program.threads) {
      const holders = this.#settings.keepHandedOverCopies ? holdersOf(thread) : thread.engines;
      if (thread.live > 0 || holders.size === 0) continue;
      if (thread.lastEndedAt === undefined || thread.lastEndedAt < program.turnStartedAt) continue;
      const tag = tagOf(programId, threadId, thread);
      if (tag === undefined) continue;
      thread.keptUntil = now + rounded;
      for (const engineId of holders) hints.push({ engineId, hint: { action: "keep", tag, keep_ms: rounded } });
    }
    return hints;
  }

  /**
   * The thread ended at `generation` (the agent abandoned or merged the branch): its
   * context is dropped where it is held, and no other thread's. A thread already at a
   * newer generation (it was reopened before this hint came) keeps its context.
   */
  threadEnded(programId: string, threadId: string, generation: number): EngineRetentionHint[] {
    const thread = this.#programs.get(programId)?.threads.get(threadId);
    if (thread === undefined || thread.generation > generation || thread.ended !== undefined) return [];
    const hints = this.#hints(programId, threadId, thread, "drop");
    thread.ended = { generation: thread.generation, droppedOn: holdersOf(thread) };
    thread.engines.clear();
    thread.copies.clear();
    thread.keptUntil = undefined;
    return hints;
  }

  /** The program ended (or expired): every context of it is dropped where it is held, and the program forgotten. */
  programEnded(programId: string): EngineRetentionHint[] {
    const program = this.#programs.get(programId);
    if (program === undefined) return [];
    this.#programs.delete(programId);
    const hints: EngineRetentionHint[] = [];
    for (const [threadId, thread] of program.threads) hints.push(...this.#hints(programId, threadId, thread, "drop"));
    return hints;
  }

  /** Whether a keep of the context is in force on the engine now (a call that comes back there should find its prefix). */
  keeps(ref: ContextRef, engineId: string, now: number): boolean {
    const thread = this.#programs.get(ref.programId)?.threads.get(ref.threadId);
    if (thread === undefined || thread.generation !== ref.generation || thread.keptUntil === undefined || thread.keptUntil <= now) return false;
    return thread.engines.has(engineId) || (this.#settings.keepHandedOverCopies && thread.copies.has(engineId));
  }

  /** Each thread's current context of the program; undefined when the planner knows nothing of it. */
  inspect(programId: string, now: number): ContextInspection[] | undefined {
    const program = this.#programs.get(programId);
    if (program === undefined) return undefined;
    return [...program.threads].map(([threadId, thread]) => ({
      threadId,
      generation: thread.generation,
      engines: [...holdersOf(thread)],
      keptUntil: thread.keptUntil !== undefined && thread.keptUntil > now ? thread.keptUntil : undefined,
    }));
  }

  /** The engine lost its cache (it went down): it holds nothing any more. */
  engineLost(engineId: string): void {
    for (const program of this.#programs.values()) {
      for (const thread of program.threads.values()) {
        thread.engines.delete(engineId);
        thread.copies.delete(engineId);
      }
    }
  }

  /** Forgets programs idle for forgetAfterMs (no live call, no keep running); sweeps at most every PRUNE_INTERVAL_MS. */
  prune(now: number): void {
    if (now - this.#prunedAt < PRUNE_INTERVAL_MS) return;
    this.#prunedAt = now;
    for (const [programId, program] of this.#programs) {
      let busy = false;
      for (const thread of program.threads.values()) {
        if (program.live > 0 || (thread.keptUntil !== undefined && thread.keptUntil > now)) busy = true;
      }
      if (!busy && now - program.lastActiveAt >= this.#settings.forgetAfterMs) this.#programs.delete(programId);
    }
  }

  #program(programId: string, now: number): TrackedProgram {
    let program = this.#programs.get(programId);
    if (program === undefined) {
      program = { threads: new Map(), lastActiveAt: now, live: 0, turnStartedAt: now, wait: undefined };
      this.#programs.set(programId, program);
    }
    program.lastActiveAt = Math.max(program.lastActiveAt, now);
    return program;
  }

  /** The program called again: its wait's real length against the prediction is one more sample of the predictor's error. */
  #waitEnded(program: TrackedProgram, now: number): void {
    const wait = program.wait;
    if (wait === undefined) return;
    program.wait = undefined;
    // Capped where the factor is: a wait far past its prediction says no more than one at the cap.
    this.#waitRatios.add(Math.min(this.#settings.maxKeepFactor, Math.max(0, now - wait.predictedAt) / wait.predictedMs));
  }

  /** A call of an ended thread's own context after all: the drop is withdrawn where it went, and the thread is live again. */
  #reopened(ref: ContextRef, thread: TrackedThread, engineId: string): EngineRetentionHint[] {
    const droppedOn = thread.ended?.droppedOn ?? new Set<string>();
    thread.ended = undefined;
    const tag = contextTag(ref);
    thread.engines.add(engineId);
    if (tag === undefined) return [];
    // The engine it runs on now may have taken the drop too (it held the context before).
    return [...new Set([...droppedOn, engineId])].map((id) => ({ engineId: id, hint: { action: "normal", tag } }));
  }

  #hints(programId: string, threadId: string, thread: TrackedThread, action: "normal" | "drop"): EngineRetentionHint[] {
    const tag = tagOf(programId, threadId, thread);
    if (tag === undefined) return [];
    return [...holdersOf(thread)].map((engineId) => ({ engineId, hint: { action, tag } }));
  }
}
