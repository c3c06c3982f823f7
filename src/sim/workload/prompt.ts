import type { ChatMessage } from "../../protocol/chat.js";
import { CHARS_PER_TOKEN } from "../../protocol/tokens.js";
import { mix32 } from "../token-hash.js";
import { hashString } from "./prng.js";
import type { CallSpec, ProgramSpec } from "./program-spec.js";

/*
 * Deterministic prompt content, so an engine's prefix cache sees the same prefix
 * whenever a program re-sends its conversation, and nothing shared across programs
 * except the system prompt.
 *
 * The compact form is a list of segments {seed, tokens}: the system prompt, then
 * each context call's new prompt and output, then the call's own new prompt. Token
 * i of a segment depends only on (seed, i), so equal seeds mean equal tokens and a
 * segment is a prefix of any longer one with its seed. Comparing segment lists
 * (commonPrefixTokens) costs O(segments), not O(tokens); materialise tokens only
 * where an engine needs them (callPromptTokens / renderPromptTokens: 4-character
 * strings, as src/protocol/tokens.ts counts them, drawn from a fixed vocabulary so
 * no string is allocated per token; renderPromptTokens copies the prefix shared
 * with an earlier rendering) or chat messages for an HTTP client (callMessages).
 */

export interface PromptSegment {
  /** Content identity: equal seeds hold equal tokens. */
  readonly seed: number;
  readonly tokens: number;
}

const PROMPT_PART = 0;
const OUTPUT_PART = 1;

const VOCABULARY: readonly string[] = (() => {
  const consonants = "bcdfghjklmnprstvwz";
  const vowels = "aeiou";
  const words: string[] = [];
  for (const a of consonants) for (const v of vowels) for (const b of consonants) words.push(`${a}${v}${b} `);
  return words;
})();

/** Seed of the shared system prompt with this id. */
export function systemPromptSeed(systemPromptId: string): number {
  return hashString(`system:${systemPromptId}`);
}

function partSeed(program: ProgramSpec, callId: number, part: number): number {
  return mix32(program.contentSeed ^ mix32(Math.imul(callId, 2) + part + 0x5bd1_e995));
}

/** Seed of the call's own new prompt: the one it repeats (samePromptAs), else its own. */
function promptSeed(program: ProgramSpec, call: CallSpec): number {
  return partSeed(program, call.samePromptAs ?? call.callId, PROMPT_PART);
}

/** Token `index` of segment `seed`. */
export function segmentToken(seed: number, index: number): string {
  return VOCABULARY[mix32(seed ^ Math.imul(index + 1, 0x9e37_79b1)) % VOCABULARY.length] as string;
}

function pushSegment(segments: PromptSegment[], seed: number, tokens: number): void {
  if (tokens > 0) segments.push({ seed, tokens });
}

/** The call's prompt: system, context (new prompt then output of each), own new prompt. */
export function callPromptSegments(program: ProgramSpec, call: CallSpec): PromptSegment[] {
  const segments: PromptSegment[] = [];
  pushSegment(segments, systemPromptSeed(call.systemPromptId), call.systemPromptTokens);
  for (const id of call.contextCallIds) {
    const earlier = program.calls[id];
    if (earlier === undefined) throw new RangeError(`call ${call.callId} of ${program.programId} names unknown context call ${id}`);
    pushSegment(segments, promptSeed(program, earlier), earlier.newPromptTokens);
    pushSegment(segments, partSeed(program, id, OUTPUT_PART), earlier.outputTokens);
  }
  pushSegment(segments, promptSeed(program, call), call.newPromptTokens);
  return segments;
}

/** The call's whole sequence once it has finished: its prompt, then its output. */
export function callSequenceSegments(program: ProgramSpec, call: CallSpec): PromptSegment[] {
  const segments = callPromptSegments(program, call);
  pushSegment(segments, partSeed(program, call.callId, OUTPUT_PART), call.outputTokens);
  return segments;
}

/** Tokens two segment lists share at their start. */
export function commonPrefixTokens(a: readonly PromptSegment[], b: readonly PromptSegment[]): number {
  let shared = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i] as PromptSegment;
    const y = b[i] as PromptSegment;
    if (x.seed !== y.seed) break;
    shared += Math.min(x.tokens, y.tokens);
    if (x.tokens !== y.tokens) break;
  }
  return shared;
}

/** Appends the segments' tokens to `out`, skipping the first `skip` of them. */
export function appendSegmentTokens(out: string[], segments: readonly PromptSegment[], skip = 0): string[] {
  let toSkip = skip;
  for (const { seed, tokens } of segments) {
    if (toSkip >= tokens) {
      toSkip -= tokens;
      continue;
    }
    for (let i = toSkip; i < tokens; i++) out.push(segmentToken(seed, i));
    toSkip = 0;
  }
  return out;
}

/** An earlier rendering to reuse: its segments and its tokens. */
export interface RenderedPrompt {
  readonly segments: readonly PromptSegment[];
  readonly tokens: readonly string[];
}

/**
 * Tokens of `segments`. With `earlier` (e.g. the thread's previous prompt), the
 * shared prefix is copied from its tokens instead of being recomputed, so a
 * growing conversation costs only its new tokens plus one array copy.
 */
export function renderPromptTokens(segments: readonly PromptSegment[], earlier?: RenderedPrompt): string[] {
  if (earlier === undefined) return appendSegmentTokens([], segments);
  const shared = Math.min(commonPrefixTokens(segments, earlier.segments), earlier.tokens.length);
  return appendSegmentTokens(earlier.tokens.slice(0, shared), segments, shared);
}

/** The call's prompt as tokens (promptTokenCount(call) of them), for an engine model. */
export function callPromptTokens(program: ProgramSpec, call: CallSpec): string[] {
  return appendSegmentTokens([], callPromptSegments(program, call));
}

function segmentText(seed: number, chars: number): string {
  const tokens = Math.ceil(chars / CHARS_PER_TOKEN);
  const parts: string[] = new Array(tokens);
  for (let i = 0; i < tokens; i++) parts[i] = segmentToken(seed, i);
  return parts.join("").slice(0, chars);
}

/** Characters renderPrompt (src/protocol/tokens.ts) adds around a message: `<|role|>` … `<|end|>\n`. */
function templateChars(role: string): number {
  return role.length + 4 + 8;
}

function message(role: "system" | "user" | "assistant", seed: number, tokens: number): ChatMessage {
  // Content is shortened by the template's characters so the rendered prompt
  // counts (nearly) the call's tokens.
  const chars = Math.max(1, tokens * CHARS_PER_TOKEN - templateChars(role));
  return { role, content: segmentText(seed, chars) };
}

/**
 * The call as chat messages for an OpenAI-compatible client: system prompt, then
 * each context call as a user message and the assistant's reply, then the new user
 * message. A later call's messages begin with an earlier call's messages and
 * reply whenever its context extends that call, so rendered prompts share prefixes
 * exactly as the segments do. Each message renders to max(1, tokens) tokens plus
 * template rounding, so countTokens(renderPrompt(...)) ≈ promptTokenCount(call).
 */
export function callMessages(program: ProgramSpec, call: CallSpec): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (call.systemPromptTokens > 0) messages.push(message("system", systemPromptSeed(call.systemPromptId), call.systemPromptTokens));
  for (const id of call.contextCallIds) {
    const earlier = program.calls[id];
    if (earlier === undefined) throw new RangeError(`call ${call.callId} of ${program.programId} names unknown context call ${id}`);
    messages.push(message("user", promptSeed(program, earlier), earlier.newPromptTokens));
    messages.push(message("assistant", partSeed(program, id, OUTPUT_PART), earlier.outputTokens));
  }
  messages.push(message("user", promptSeed(program, call), call.newPromptTokens));
  return messages;
}
