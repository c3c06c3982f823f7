import { z } from "zod";
import { type Distribution, knob } from "./distribution.js";

/*
 * The four agent kinds and their knobs. Defaults come from the "Agent workloads"
 * table of /work/shared/reference/workloads-and-engines.md; each names its source
 * (Autellix §6.1, Continuum, TraceLab, BFCL v4, SWE-agent / mini-swe-agent), and
 * figures no source gives are marked ASSUMED. Shapes (lognormal σ, fan-out weights)
 * were fitted so the generated means land on the published ones: see README.md.
 * Token and gap knobs are per call; `gapSec` is one tool call's (or one human
 * pause's) duration in seconds.
 */

export const AGENT_KINDS = ["chat", "function-calling", "tree-search", "coding-agent"] as const;
export type AgentKind = (typeof AGENT_KINDS)[number];

/**
 * How a step's parallel tool calls become LLM calls:
 * - "threads": each tool result is taken up by its own LLM call on its own thread
 *   (LLMCompiler-style branches), and the next step joins all of them;
 * - "tools": one LLM call consumes all results, after the slowest tool finishes.
 */
export const FAN_OUT_MODES = ["threads", "tools"] as const;
export type FanOutMode = (typeof FAN_OUT_MODES)[number];

const freeze = <T>(d: T): Readonly<T> => Object.freeze(d);
const atLeastOne = (d: Distribution) => knob(1).default(freeze(d));
const seconds = (d: Distribution) => knob(0).default(freeze(d));
/** Shared by every program of the entry, so it is one number, not a distribution. */
const systemPromptTokens = (n: number) => z.int().min(0).max(100_000).default(n);

/** ShareGPT conversations, Autellix §6.1. */
export const ChatParams = z.strictObject({
  /** Mean 6.66, heavy tail, max 80 (Autellix §6.1). */
  callsPerProgram: atLeastOne({ dist: "lognormal", median: 4.45, sigma: 0.9, integer: true, min: 1, max: 80 }),
  /** Mean 256; the conversation so far is the prefix (Autellix §6.1). */
  newPromptTokens: atLeastOne({ dist: "lognormal", median: 128, mean: 256, integer: true, min: 1, max: 32_768 }),
  /** Mean 277 (Autellix §6.1). */
  outputTokens: atLeastOne({ dist: "lognormal", median: 190, mean: 277, integer: true, min: 1, max: 8_192 }),
  /** 0 under stress (Autellix §6.1); a human pause otherwise is ASSUMED by the user. */
  gapSec: seconds({ dist: "constant", value: 0 }),
  /** ShareGPT conversations carry no system prompt. */
  systemPromptTokens: systemPromptTokens(0),
});

/** BFCL, Autellix §6.1; tool latency from Continuum; fan-out from BFCL v4 multi-turn. */
export const FunctionCallingParams = z.strictObject({
  /** Mean 10.75, max 70 (Autellix §6.1). */
  callsPerProgram: atLeastOne({ dist: "lognormal", median: 8.5, sigma: 0.7, integer: true, min: 1, max: 70 }),
  /** Mean 735 (Autellix §6.1). */
  newPromptTokens: atLeastOne({ dist: "lognormal", median: 520, mean: 735, integer: true, min: 1, max: 16_384 }),
  /** Mean 34 (Autellix §6.1): a function call is short JSON. */
  outputTokens: atLeastOne({ dist: "lognormal", median: 28, mean: 34, integer: true, min: 1, max: 1_024 }),
  /** Web tools: lognormal, median 1.3 s, mean 1.9 s (Continuum). Local tools (1–10 ms) are ASSUMED: use uniform 0.001–0.01. */
  gapSec: seconds({ dist: "lognormal", median: 1.3, mean: 1.9 }),
  /** Tool calls per step: up to 7; the per-conversation max averages 2.45 (BFCL v4 multi-turn). */
  fanOut: atLeastOne({ dist: "discrete", values: [1, 2, 3, 4, 5, 6, 7], weights: [0.81, 0.1, 0.045, 0.023, 0.012, 0.006, 0.004] }),
  fanOutMode: z.enum(FAN_OUT_MODES).default("threads"),
  /** Tool schemas form a shared prefix (Autellix §6.1); the size is ASSUMED. */
  systemPromptTokens: systemPromptTokens(1_024),
});

/** LATS, Autellix §6.1: calls = iterations × children per expansion. */
export const TreeSearchParams = z.strictObject({
  /** Up to 50; fitted so calls/program average 159.7 = 5 × 31.94 (Autellix §6.1). Stopping at 50 piles up there (clamp). */
  iterations: atLeastOne({ dist: "exponential", mean: 51, integer: true, min: 1, max: 50, truncate: "clamp" }),
  /** 5 children per expansion (Autellix §6.1), sampled in parallel. */
  childrenPerExpansion: z.int().min(1).max(64).default(5),
  /** Mean 467 (Autellix §6.1). */
  newPromptTokens: atLeastOne({ dist: "lognormal", median: 400, mean: 467, integer: true, min: 1, max: 8_192 }),
  /** Mean 73 (Autellix §6.1). */
  outputTokens: atLeastOne({ dist: "lognormal", median: 62, mean: 73, integer: true, min: 1, max: 1_024 }),
  /** ~0.5 s environment lookups: ASSUMED. */
  gapSec: seconds({ dist: "exponential", mean: 0.5 }),
  /** Longest trajectory; ASSUMED (the HotpotQA agent's step limit). A node this deep is terminal. */
  maxDepth: z.int().min(1).max(1_000).default(7),
  /** Chance the next expansion leaves the newest children for an older open node: ASSUMED. */
  backtrackProbability: z.number().min(0).max(1).default(0.2),
  /** Few-shot examples shared by every program; the size is ASSUMED. */
  systemPromptTokens: systemPromptTokens(1_024),
});

/** SWE-agent / mini-swe-agent steps; tool timing and fan-out from TraceLab. */
export const CodingAgentParams = z.strictObject({
  /** mini-swe-agent averages ~11 steps, SWE-agent / Terminal-Bench medians are 20–78: median 30 is ASSUMED within that range. */
  callsPerProgram: atLeastOne({ dist: "lognormal", median: 30, sigma: 0.8, integer: true, min: 1, max: 250 }),
  /** First prompt ~5k = system prompt (below) + this task prompt (SWE-agent). */
  firstPromptTokens: atLeastOne({ dist: "normal", mean: 3_000, sd: 800, min: 500, integer: true }),
  /** ~875 new tokens per step (tool output and next instruction). */
  newPromptTokens: atLeastOne({ dist: "lognormal", median: 500, mean: 875, integer: true, min: 1, max: 32_000 }),
  /** ~114–214 per step: the midpoint. */
  outputTokens: atLeastOne({ dist: "lognormal", median: 130, mean: 164, integer: true, min: 1, max: 4_096 }),
  /**
   * One tool call. TraceLab gives p50 0.3 s, p90 13.6 s, p99 3.6 min, 4 % of calls
   * over a minute holding 85 % of tool time. A lognormal with median 0.3 s and
   * σ 2.86 (least squares on log p90 and log p99) cut at an ASSUMED 1-hour timeout
   * gives p90 11.7 s, p99 3.7 min, 3.2 % over a minute holding 77 % of tool time;
   * uncut it would hold 85 %, but then a few calls run for hours.
   */
  gapSec: seconds({ dist: "lognormal", median: 0.3, sigma: 2.86, max: 3_600 }),
  /** 1.2 tool calls per step, p99 4 (TraceLab). */
  fanOut: atLeastOne({ dist: "discrete", values: [1, 2, 3, 4], weights: [0.859, 0.094, 0.035, 0.012] }),
  fanOutMode: z.enum(FAN_OUT_MODES).default("tools"),
  /** Context grows to ~70k (SWE-agent); the prompt never exceeds this many tokens. */
  contextCapTokens: z.int().min(1_000).max(1_000_000).default(70_000),
  /**
   * When the next prompt would pass the cap, the oldest steps (the first prompt
   * only if it alone no longer fits) are dropped until it fits in this fraction of
   * the cap, as a compaction would: ASSUMED. The cached prefix breaks there, as it does in real agents.
   */
  compactToFraction: z.number().gt(0).max(1).default(0.5),
  /** System prompt and tool docs shared by every program; the size is ASSUMED. */
  systemPromptTokens: systemPromptTokens(2_000),
}).superRefine((params, ctx) => {
  if (params.contextCapTokens < params.systemPromptTokens + 1_000) {
    ctx.addIssue({ code: "custom", path: ["contextCapTokens"], message: `must leave at least 1000 tokens after the system prompt (${params.systemPromptTokens})` });
  }
});

export type ChatParams = z.output<typeof ChatParams>;
export type FunctionCallingParams = z.output<typeof FunctionCallingParams>;
export type TreeSearchParams = z.output<typeof TreeSearchParams>;
export type CodingAgentParams = z.output<typeof CodingAgentParams>;

export interface KindParams {
  chat: ChatParams;
  "function-calling": FunctionCallingParams;
  "tree-search": TreeSearchParams;
  "coding-agent": CodingAgentParams;
}
