/*
 * Recognising an agent program from its conversation, for calls that carry no
 * program header (pure: the clock is passed in; one index per tenant).
 *
 * An agent calls the model with its whole conversation each time: the messages it
 * sent before, the model's reply, then what happened since (tool results, a user
 * turn). So a call whose messages start with an earlier call's messages plus that
 * call's reply continues that call's program, on its thread. The evidence is the
 * reply: model output is sampled, so two agents share it only by chance, while two
 * agents may well share a system prompt and a first user message. Hence:
 *
 * - continuation: the longest prefix of the call's messages that ends in a recorded
 *   reply (an "end") names the program and thread; the first call to continue an end
 *   takes its thread;
 * - fork: a later call continuing the same end, with different messages, is a new
 *   thread of that program (a tree search expanding a node);
 * - retry: a call whose messages are exactly those of a call that failed (never
 *   answered) is that call again: same program, same thread;
 * - otherwise nothing links it: a new program. In particular a call with no reply in
 *   its history (an agent's first call) is never merged with another agent's, however
 *   alike their first messages are.
 *
 * Entries are prefix hashes (two 32-bit FNV-1a lanes over the canonical messages,
 * chained), so the index holds no conversation text: at most `maxEntries` (least
 * recently used dropped first), each forgotten `ttlMs` after its last use.
 */

export type Recognition =
  | { programId: string; thread: string; how: "continuation" | "retry" }
  /** `parent`: the thread the fork branches off. */
  | { programId: string; thread: string; how: "fork"; parent: string }
  | undefined;

export interface ConversationIndexOptions {
  maxEntries?: number;
  /** An entry unused this long is forgotten (the edge uses the program idle TTL). */
  ttlMs?: number;
}

export interface EndEntry {
  kind: "end";
  programId: string;
  thread: string;
  /** The hash of the first call that continued this end: a different call continuing it is a fork. */
  continuedBy?: string;
  forks: number;
  usedAt: number;
}

export interface FailedEntry {
  kind: "failed";
  programId: string;
  thread: string;
  usedAt: number;
}

export type Entry = EndEntry | FailedEntry;

/**
 * Where the index keeps its entries: a Map here (MemoryEntries), a Durable Object's
 * SQLite at the edge (program/index-entries.ts). `touch` marks an entry used (for
 * least-recently-used eviction); `trim` keeps at most `max`, dropping the least recently used.
 */
export interface IndexEntries {
  get(hash: string): Entry | undefined;
  put(hash: string, entry: Entry): void;
  delete(hash: string): void;
  touch(hash: string, entry: Entry): void;
  trim(max: number): void;
  /** Drops every entry of a program (it ended: calls must not be linked to it). */
  forgetProgram(programId: string): void;
  readonly size: number;
}

/** Entries in memory, least recently used first (a Map keeps insertion order). */
export class MemoryEntries implements IndexEntries {
  readonly #map = new Map<string, Entry>();
  get size(): number {
    return this.#map.size;
  }
  get(hash: string): Entry | undefined {
    return this.#map.get(hash);
  }
  put(hash: string, entry: Entry): void {
    this.#map.delete(hash);
    this.#map.set(hash, entry);
  }
  delete(hash: string): void {
    this.#map.delete(hash);
  }
  touch(hash: string, entry: Entry): void {
    this.put(hash, entry);
  }
  forgetProgram(programId: string): void {
    for (const [hash, entry] of this.#map) if (entry.programId === programId) this.#map.delete(hash);
  }
  trim(max: number): void {
    while (this.#map.size > max) {
      const oldest = this.#map.keys().next().value;
      if (oldest === undefined) return;
      this.#map.delete(oldest);
    }
  }
}

const FNV_OFFSET_A = 0x811c9dc5;
const FNV_OFFSET_B = 0x01000193 ^ 0x5bd1e995;
const FNV_PRIME = 0x01000193;

/** One chained step: the hash of the conversation `previous` extended by `message`. */
function chain(previous: string, message: string): string {
  let a = FNV_OFFSET_A;
  let b = FNV_OFFSET_B;
  const text = `${previous}\u0000${message}`;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    a = Math.imul(a ^ code, FNV_PRIME) >>> 0;
    b = Math.imul(b ^ ((code * 31) & 0xffff), FNV_PRIME) >>> 0;
  }
  return `${a.toString(36)}.${b.toString(36)}.${text.length.toString(36)}`;
}

/** The chained hashes of every prefix of `messages` (index k: the first k + 1 messages), scoped by model. */
export function prefixHashes(model: string, messages: readonly string[]): string[] {
  const hashes: string[] = [];
  let hash = chain("", model);
  for (const message of messages) {
    hash = chain(hash, message);
    hashes.push(hash);
  }
  return hashes;
}

/** Thread names are at most 64 characters (protocol/ids.ts THREAD_NAME): deep forks restart from a short name. */
function forkThread(parent: string, n: number): string {
  const name = `${parent}.${n}`;
  return name.length <= 64 ? name : `fork.${chain(parent, String(n)).slice(0, 24).replace(/[^\w.:-]/g, "")}`;
}

export class ConversationIndex {
  readonly #entries: IndexEntries;
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  /** The last conversation hashed: recognize then recordCall of one call hash it once. */
  #hashed: { model: string; messages: readonly string[]; hashes: string[] } | undefined;

  constructor(options: ConversationIndexOptions = {}, entries: IndexEntries = new MemoryEntries()) {
    this.#entries = entries;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#ttlMs = options.ttlMs ?? 15 * 60_000;
    if (!(Number.isInteger(this.#maxEntries) && this.#maxEntries >= 1)) throw new RangeError(`maxEntries must be >= 1, got ${this.#maxEntries}`);
    if (!(this.#ttlMs > 0)) throw new RangeError(`ttlMs must be > 0, got ${this.#ttlMs}`);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The program (and thread) a call with these canonical messages joins; undefined: a new program. */
  recognize(model: string, messages: readonly string[], now: number): Recognition {
    if (messages.length === 0) return undefined;
    const hashes = this.#prefixHashes(model, messages);
    const whole = hashes[hashes.length - 1] ?? "";
    const failed = this.#live(whole, now);
    if (failed?.kind === "failed") return { programId: failed.programId, thread: failed.thread, how: "retry" };
    // The longest earlier reply this call's conversation extends (the whole conversation itself is not one: it would be a resend).
    for (let k = hashes.length - 2; k >= 0; k--) {
      const entry = this.#live(hashes[k] ?? "", now);
      if (entry?.kind !== "end") continue;
      if (entry.continuedBy === undefined || entry.continuedBy === whole) {
        return { programId: entry.programId, thread: entry.thread, how: "continuation" };
      }
      return { programId: entry.programId, thread: forkThread(entry.thread, entry.forks + 1), how: "fork", parent: entry.thread };
    }
    return undefined;
  }

  /**
   * A call was sent on program/thread: the reply it continues is now taken (a different
   * call continuing the same reply is a fork, counted here so fork threads differ).
   */
  recordCall(model: string, messages: readonly string[], programId: string, thread: string, now: number): void {
    const hashes = this.#prefixHashes(model, messages);
    const whole = hashes[hashes.length - 1];
    if (whole === undefined) return;
    for (let k = hashes.length - 2; k >= 0; k--) {
      const entry = this.#live(hashes[k] ?? "", now);
      if (entry?.kind !== "end" || entry.programId !== programId) continue;
      if (entry.continuedBy === undefined) entry.continuedBy = whole;
      else if (entry.continuedBy !== whole && thread !== entry.thread) entry.forks += 1;
      this.#entries.put(hashes[k] ?? "", entry);
      break;
    }
    // A resend of a failed call is under way again: it is no longer a retry candidate until it fails.
    if (this.#entries.get(whole)?.kind === "failed") this.#entries.delete(whole);
  }

  /** A call finished with `reply` (the canonical assistant message the client will replay). */
  recordReply(model: string, messages: readonly string[], reply: string, programId: string, thread: string, now: number): void {
    const hashes = prefixHashes(model, [...messages, reply]);
    const end = hashes[hashes.length - 1];
    if (end === undefined) return;
    this.#set(end, { kind: "end", programId, thread, forks: 0, usedAt: now });
  }

  /** A program that can take no more calls (ended, expired): nothing links to it any more. */
  forgetProgram(programId: string): void {
    this.#entries.forgetProgram(programId);
  }

  /** A call failed (error, timeout, cancelled): an identical re-send is a retry. */
  recordFailure(model: string, messages: readonly string[], programId: string, thread: string, now: number): void {
    const hashes = prefixHashes(model, messages);
    const whole = hashes[hashes.length - 1];
    if (whole === undefined) return;
    this.#set(whole, { kind: "failed", programId, thread, usedAt: now });
  }

  /** prefixHashes, reused when asked again about the very same messages (the same array). */
  #prefixHashes(model: string, messages: readonly string[]): string[] {
    const last = this.#hashed;
    if (last !== undefined && last.messages === messages && last.model === model) return last.hashes;
    const hashes = prefixHashes(model, messages);
    this.#hashed = { model, messages, hashes };
    return hashes;
  }

  #live(hash: string, now: number): Entry | undefined {
    const entry = this.#entries.get(hash);
    if (entry === undefined) return undefined;
    if (now - entry.usedAt > this.#ttlMs) {
      this.#entries.delete(hash);
      return undefined;
    }
    entry.usedAt = now;
    this.#entries.touch(hash, entry);
    return entry;
  }

  #set(hash: string, entry: Entry): void {
    this.#entries.put(hash, entry);
    this.#entries.trim(this.#maxEntries);
  }
}

/** Tool-call arguments with their keys sorted, so a client's re-serialisation does not change the hash. */
function normalisedArguments(args: unknown): string {
  const sorted = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(sorted);
    if (typeof value === "object" && value !== null) {
      return Object.fromEntries(
        Object.keys(value)
          .sort()
          .map((key) => [key, sorted((value as Record<string, unknown>)[key])]),
      );
    }
    return value;
  };
  if (typeof args !== "string") return JSON.stringify(sorted(args ?? null));
  try {
    return JSON.stringify(sorted(JSON.parse(args)));
  } catch {
    return args.trim();
  }
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (typeof part === "object" && part !== null && typeof (part as { text?: unknown }).text === "string" ? (part as { text: string }).text : ""))
    .join("");
}

/**
 * A chat message in the canonical form the index hashes: its role, its text (trimmed:
 * clients differ in trailing whitespace), its tool calls (name and normalised
 * arguments; call IDs are left out, since some clients rewrite them) and, for a tool
 * result, nothing of its call ID either.
 */
export function canonicalMessage(message: { role: string; content?: unknown; tool_calls?: unknown; tool_call_id?: unknown }): string {
  const calls = Array.isArray(message.tool_calls)
    ? message.tool_calls.map((call) => {
        const fn = typeof call === "object" && call !== null ? (call as { function?: { name?: unknown; arguments?: unknown } }).function : undefined;
        return `${typeof fn?.name === "string" ? fn.name : ""}(${normalisedArguments(fn?.arguments)})`;
      })
    : [];
  // A developer message is the system prompt under another name.
  const role = message.role === "developer" ? "system" : message.role;
  return `${role}\u0001${contentText(message.content).trim()}\u0001${calls.join("\u0002")}`;
}
