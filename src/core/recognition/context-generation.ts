/*
 * Context generations of a program's threads (pure). An agent's call re-sends the
 * thread's whole conversation: the previous call's messages, its reply, then what
 * happened since. A call whose messages no longer start with the previous call's has
 * replaced the thread's context (its history was compacted into a summary, or
 * rewritten): it starts a new generation, and the KV of the older one will not be read
 * again. The pool tags KV by program, thread and generation (protocol/kv-retention.ts),
 * so a new generation lets it drop the old context first.
 *
 * What is kept per thread is the previous call's message count and the prefix hash of
 * those messages (conversation-index.ts prefixHashes), never their text.
 */

export interface ThreadContext {
  /** 0 for a thread's first context; one more each time a call stops extending the previous one. */
  generation: number;
  /** Messages of the thread's previous call; 0 while it has had none with a conversation. */
  messages: number;
  /** The prefix hash of those messages; "" while none. */
  hash: string;
}

/** Prefix hashes a call carries at most; a longer conversation is not compared (its generation stays). */
export const MAX_CONTEXT_MESSAGES = 8_192;

/** A thread that has not had a call yet, and no parent. */
export const FIRST_CONTEXT: ThreadContext = { generation: 0, messages: 0, hash: "" };

/**
 * The thread's context after a call whose conversation has these prefix hashes (index k:
 * the first k + 1 messages). `previous` is the thread's own context, or for a new fork its
 * parent's: a fork starts at its parent's context, so a fork that continues the parent's
 * conversation keeps its generation and one that replaced it starts the next. A call
 * with no conversation (a bare completions prompt) tells nothing and changes nothing.
 */
export function nextThreadContext(previous: ThreadContext, hashes: readonly string[]): ThreadContext {
  const last = hashes[hashes.length - 1];
  if (last === undefined) return previous;
  const extendsPrevious = previous.messages === 0 || hashes[previous.messages - 1] === previous.hash;
  return { generation: extendsPrevious ? previous.generation : previous.generation + 1, messages: hashes.length, hash: last };
}

/**
 * The context of an ended thread that takes a call again: the next generation, with no
 * previous messages. Its old context was dropped where it was held (the end's hint), so
 * the call must not share that context's tag; whatever it sends then extends this one.
 */
export function reopenedContext(ended: ThreadContext): ThreadContext {
  return { generation: ended.generation + 1, messages: 0, hash: "" };
}
