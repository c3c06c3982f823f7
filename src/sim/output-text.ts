import { mix32 } from "./token-hash.js";

/*
 * Deterministic generations: the same prompt always yields the same length and the
 * same words, so tests and simulations are reproducible and a repeated prompt is a
 * repeated sequence (it hits the prefix cache like a real one would).
 */

const VOCABULARY = [
  "the", "agent", "reads", "file", "and", "then", "calls", "a", "tool", "to", "check",
  "result", "of", "plan", "step", "next", "it", "writes", "code", "test", "passes",
  "error", "fix", "search", "query", "returns", "value", "list", "items", "for", "each",
  "branch", "node", "score", "best", "answer", "is", "ready", "now", "with", "data",
  "from", "cache", "load", "model", "output", "token", "done", "update", "state", "in",
  "loop", "until", "goal", "found", "path", "open", "close", "run", "command", "shell",
  "patch", "diff", "ok",
] as const;

/** First token without a leading space, every later one with it, as BPE text reads. */
const FIRST_TEXT: readonly string[] = VOCABULARY;
const LATER_TEXT: readonly string[] = VOCABULARY.map((word) => ` ${word}`);

export const VOCABULARY_SIZE = VOCABULARY.length;

/** Natural (EOS-terminated) output lengths span 16..300 tokens. */
export const MIN_NATURAL_OUTPUT = 16;
export const MAX_NATURAL_OUTPUT = 300;

/** Where the generation would stop on its own (its EOS), from the prompt's seed. */
export function naturalOutputTokens(seed: number): number {
  return MIN_NATURAL_OUTPUT + (mix32(seed ^ 0x2545_f491) % (MAX_NATURAL_OUTPUT - MIN_NATURAL_OUTPUT + 1));
}

/** Vocabulary index of generated token `index` (0-based) of a prompt with this seed. */
export function outputWordIndex(seed: number, index: number): number {
  return mix32(seed ^ Math.imul(index + 1, 0x9e37_79b1)) % VOCABULARY_SIZE;
}

/** Text of generated token `index`. */
export function outputTokenText(seed: number, index: number): string {
  const word = outputWordIndex(seed, index);
  return (index === 0 ? FIRST_TEXT[word] : LATER_TEXT[word]) ?? "";
}

/** The whole generation of `count` tokens. */
export function outputText(seed: number, count: number): string {
  let text = "";
  for (let i = 0; i < count; i++) text += outputTokenText(seed, i);
  return text;
}
