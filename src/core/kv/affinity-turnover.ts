/*
 * Whether a program's prefix has likely left the engine that served it last, judged by
 * that engine's KV turnover since: the prompt tokens it computed (not found in its
 * prefix cache) after the program's call left it. A prefix cache evicts the least
 * recently used blocks as new ones are computed, so once an engine has computed more
 * than `fraction` × its KV capacity, a prefix idle since then is likely gone. Routing
 * (routing.ts) then treats the call as one without a hint: a long prompt kept on its
 * program's engine would be recomputed there anyway, while a less loaded engine waits.
 *
 * Why turnover and not time (cache-credit.ts decays by a half-life): eviction follows
 * new blocks, not the clock; an idle engine keeps its cache for hours, a busy one
 * can turn over in seconds (in the evolve simulator's KV mix, coding agents kept on
 * their engine through 15 s tool waits recomputed 13.3 of their 15.2 M prompt tokens).
 *
 * Counted at a call's end from the engine's usage (prompt − cached tokens), on the
 * engine that prefilled it. Decode blocks are left out: a small share for the long
 * prompts this rule is about, and a split call's are on its decode engine. Only engines
 * that report cached tokens are judged (one report above 0 so far): without it every
 * prompt would count whole (vLLM reports them with --enable-prompt-tokens-details,
 * SGLang with --enable-cache-report, the simulated engines always), and a hint to any
 * other engine is kept.
 *
 * Memory: one mark per program, until the program ends; at most MAX_MARKS, the least
 * recently marked going first.
 */

const MAX_MARKS = 200_000;

interface Mark {
  engineId: string;
  /** The engine's computed tokens when the program's call left it. */
  computedAt: number;
}

export class AffinityTurnover {
  /** Prompt tokens each engine computed, cumulative. */
  readonly #computed = new Map<string, number>();
  readonly #reportsCached = new Set<string>();
  readonly #marks = new Map<string, Mark>();

  /** `fraction`: of an engine's KV capacity, the turnover after which a program's prefix there is taken as gone. */
  constructor(readonly fraction: number) {
    if (!(Number.isFinite(fraction) && fraction > 0)) throw new RangeError(`affinity turnover fraction must be a finite number > 0, got ${fraction}`);
  }

  /**
   * A call of the program left the engine that prefilled it, with the engine's usage for
   * it. Usage that is not a pair of finite counts is ignored: this runs where a call
   * settles, which an engine's odd figures must not break.
   */
  callLeft(programId: string, engineId: string, usage: { promptTokens: number; cachedTokens: number }): void {
    const { promptTokens, cachedTokens } = usage;
    if (!(Number.isFinite(promptTokens) && Number.isFinite(cachedTokens) && promptTokens >= 0 && cachedTokens >= 0)) return;
    const computed = Math.max(0, promptTokens - cachedTokens);
    if (cachedTokens > 0) this.#reportsCached.add(engineId);
    const total = (this.#computed.get(engineId) ?? 0) + computed;
    this.#computed.set(engineId, total);
    // Re-inserted so the Map's order is the marks' recency.
    this.#marks.delete(programId);
    this.#marks.set(programId, { engineId, computedAt: total });
    if (this.#marks.size > MAX_MARKS) this.#marks.delete(this.#marks.keys().next().value as string);
  }

  /**
   * True when the hint to `engineId` is stale: the program's last call left that engine,
   * which has since computed more than fraction × `capacityTokens`. Reading changes
   * nothing (every call of the program is judged alike until its next call leaves).
   */
  stale(programId: string, engineId: string, capacityTokens: number): boolean {
    const mark = this.#marks.get(programId);
    if (mark === undefined || mark.engineId !== engineId || !this.#reportsCached.has(engineId)) return false;
    return (this.#computed.get(engineId) ?? 0) - mark.computedAt > this.fraction * capacityTokens;
  }

  /** Tokens the engine computed since the program's call left it; undefined when its last call left another engine (or none is known). */
  computedSince(programId: string, engineId: string): number | undefined {
    const mark = this.#marks.get(programId);
    if (mark === undefined || mark.engineId !== engineId) return undefined;
    return (this.#computed.get(engineId) ?? 0) - mark.computedAt;
  }

  forgetProgram(programId: string): void {
    this.#marks.delete(programId);
  }

  get marks(): number {
    return this.#marks.size;
  }
}
