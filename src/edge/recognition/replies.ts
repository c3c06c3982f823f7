import { canonicalMessage } from "../../core/recognition/conversation-index.js";
import type { ChatMessage } from "../../protocol/chat.js";
import { type MessagesResponse, ResponseContentBlock } from "../../protocol/messages.js";
import type { InputItem } from "../../protocol/responses.js";
import { messagesToChatRequest } from "../../protocol/translate/messages-chat.js";
import { conversationItemsOf, responsesToChatRequest } from "../../protocol/translate/responses-chat.js";
import { z } from "zod";

/*
 * A call's reply in the canonical form the conversation index hashes
 * (core/recognition), from each API's answer: the assistant message its client will
 * replay in the next call. Each goes through the same chat view the client's replay
 * goes through (protocol/translate), so the hashes meet.
 */

/** At most this much reply text is kept while a stream passes; a longer reply links nothing. */
export const MAX_REPLY_CHARS = 1_048_576;

/** The chat view of a call's messages, canonical: what the index is asked about. */
export const canonicalConversation = (messages: readonly ChatMessage[]): string[] => messages.map(canonicalMessage);

const ChatAnswer = z.looseObject({ choices: z.array(z.looseObject({ index: z.number(), message: z.looseObject({ role: z.string() }).optional() })) });

export function chatReplyOf(answer: unknown): string | undefined {
  const parsed = ChatAnswer.safeParse(answer);
  const message = parsed.success ? parsed.data.choices.find((c) => c.index === 0)?.message : undefined;
  return message === undefined ? undefined : canonicalMessage({ ...message, role: "assistant" });
}

/** The assistant turn as the client replays it (content blocks), through the same translation as its request. */
export function messagesBlocksReply(content: MessagesResponse["content"]): string | undefined {
  if (content.length === 0) return undefined;
  const replay = messagesToChatRequest({ model: "m", max_tokens: 1, messages: [{ role: "assistant", content }] });
  const assistant = replay.messages.find((m) => m.role === "assistant");
  return assistant === undefined ? undefined : canonicalMessage(assistant);
}

/** An answer's content as any engine writes it: its text and tool_use blocks (a native engine's thinking blocks are not replayed). */
const AnswerContent = z.looseObject({ content: z.array(z.unknown()) });

export function messagesReplyOf(answer: unknown): string | undefined {
  const parsed = AnswerContent.safeParse(answer);
  if (!parsed.success) return undefined;
  const blocks = parsed.data.content.flatMap((block) => {
    const known = ResponseContentBlock.safeParse(block);
    return known.success ? [known.data] : [];
  });
  return messagesBlocksReply(blocks);
}

const ResponseOutput = z.looseObject({ output: z.array(z.unknown()) });

/** The response's output items as the client replays them in its next input, through the same translation. */
export function responsesReplyOf(answer: unknown): string | undefined {
  const parsed = ResponseOutput.safeParse(answer);
  if (!parsed.success || parsed.data.output.length === 0) return undefined;
  const items: InputItem[] = conversationItemsOf({ model: "m", input: [] }, parsed.data);
  const replay = responsesToChatRequest({ model: "m", input: items });
  const assistant = replay.messages.filter((m) => m.role === "assistant");
  return assistant.length === 1 && assistant[0] ? canonicalMessage(assistant[0]) : undefined;
}
