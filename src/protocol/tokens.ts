import type { ChatCompletionRequest, ChatMessage } from "./chat.js";

/*
 * One deterministic tokenisation shared by the edge (quota estimates), the pool
 * (short/long routing) and the simulated engine (prompt tokens, prefix-cache
 * blocks): a token is four characters of the rendered prompt. Real engines count
 * differently; the edge settles on the engine's reported usage, not on this.
 */
export const CHARS_PER_TOKEN = 4;

function contentText(message: ChatMessage): string {
  const { content } = message;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part.text === "string" ? part.text : "")).join("");
  }
  return "";
}

/** The prompt as a chat template would render it, in a stable form. */
export function renderPrompt(req: Pick<ChatCompletionRequest, "messages" | "tools">): string {
  const tools = req.tools && req.tools.length > 0 ? `<tools>${JSON.stringify(req.tools)}</tools>\n` : "";
  const turns = req.messages.map((m) => {
    const calls = m.tool_calls ? JSON.stringify(m.tool_calls) : "";
    return `<|${m.role}|>${contentText(m)}${calls}<|end|>\n`;
  });
  return tools + turns.join("");
}

export function countTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** Splits text into its tokens (the last may be shorter). */
export function tokenize(text: string): string[] {
  const tokens: string[] = [];
  for (let i = 0; i < text.length; i += CHARS_PER_TOKEN) tokens.push(text.slice(i, i + CHARS_PER_TOKEN));
  return tokens;
}

export function estimatePromptTokens(req: Pick<ChatCompletionRequest, "messages" | "tools">): number {
  return countTokens(renderPrompt(req));
}
