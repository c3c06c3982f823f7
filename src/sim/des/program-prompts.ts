/*
 * A program's prompts as engine tokens, rendered cheaply. Each call's prompt is
 * rendered from the rendering of one earlier call of the same program, its anchor
 * (renderPromptTokens copies the shared prefix instead of recomputing it), and the
 * anchor's block hashes cover the shared full blocks, so only new blocks are hashed.
 * The anchor is the candidate sharing the longest prefix among the call's last few
 * context calls and the previous call on its thread: the last context call for a
 * chat or a tree-search path, the first call of the previous step for parallel
 * tool branches. A rendering is kept only while a later call still anchors on it,
 * so memory follows the live frontier of the program, not its whole history.
 *
 * The last call to use an anchor whose whole prompt it extends appends to the
 * anchor's token array instead of copying it (a chat or a coding agent's steps then
 * cost only their new tokens). The engine allows this: it reads a request's prompt
 * only up to the length it had at submission.
 */

import { promptBlockHashes } from "../token-hash.js";
import { type CallSpec, type ProgramSpec } from "../workload/program-spec.js";
import { appendSegmentTokens, callPromptSegments, commonPrefixTokens, type PromptSegment, renderPromptTokens } from "../workload/prompt.js";

export interface RenderedCall {
  /** The prompt as engine tokens (do not mutate: the engine keeps it by reference). */
  tokens: string[];
  /** promptBlockHashes(tokens, blockSize). */
  blockHashes: number[];
}

interface Rendering extends RenderedCall {
  segments: readonly PromptSegment[];
}

/** Context calls considered as anchors, counted from the end of the context. */
const ANCHOR_CANDIDATES = 8;

export class ProgramPrompts {
  /** Anchor call id per call, -1 for none. */
  readonly #anchor: Int32Array;
  /** Calls not yet rendered that anchor on each call. */
  readonly #users: Int32Array;
  readonly #kept = new Map<number, Rendering>();

  constructor(
    private readonly program: ProgramSpec,
    private readonly blockSize: number,
  ) {
    const calls = program.calls;
    this.#anchor = new Int32Array(calls.length).fill(-1);
    this.#users = new Int32Array(calls.length);
    const segments: PromptSegment[][] = calls.map((call) => callPromptSegments(program, call));
    const lastOnThread = new Map<string, number>();
    calls.forEach((call, i) => {
      const own = segments[i] as PromptSegment[];
      const candidates = call.contextCallIds.slice(-ANCHOR_CANDIDATES);
      const previous = lastOnThread.get(call.thread);
      if (previous !== undefined) candidates.push(previous);
      let best = -1;
      let bestShared = 0;
      for (const c of candidates) {
        if (c >= i || c < 0) continue;
        const shared = commonPrefixTokens(own, segments[c] as PromptSegment[]);
        if (shared > bestShared || (shared === bestShared && shared > 0 && c > best)) {
          best = c;
          bestShared = shared;
        }
      }
      if (best >= 0 && bestShared >= blockSize) {
        this.#anchor[i] = best;
        this.#users[best] = (this.#users[best] ?? 0) + 1;
      }
      lastOnThread.set(call.thread, i);
    });
  }

  /** Renders call `callId`'s prompt; call once per call. */
  render(callId: number): RenderedCall {
    const call = this.program.calls[callId] as CallSpec | undefined;
    if (call === undefined) throw new RangeError(`${this.program.programId} has no call ${callId}`);
    const segments = callPromptSegments(this.program, call);
    const anchorId = this.#anchor[callId] ?? -1;
    const earlier = anchorId >= 0 ? this.#kept.get(anchorId) : undefined;
    let rendering: Rendering;
    if (earlier === undefined) {
      const tokens = renderPromptTokens(segments);
      rendering = { segments, tokens, blockHashes: promptBlockHashes(tokens, this.blockSize) };
    } else {
      const shared = Math.min(commonPrefixTokens(segments, earlier.segments), earlier.tokens.length);
      const lastUser = (this.#users[anchorId] ?? 0) === 1;
      const tokens =
        lastUser && shared === earlier.tokens.length ? appendSegmentTokens(earlier.tokens, segments, shared) : renderPromptTokens(segments, earlier);
      const known = earlier.blockHashes.slice(0, Math.floor(shared / this.blockSize));
      rendering = { segments, tokens, blockHashes: promptBlockHashes(tokens, this.blockSize, known) };
    }
    if (anchorId >= 0) {
      const left = (this.#users[anchorId] ?? 0) - 1;
      this.#users[anchorId] = left;
      if (left <= 0) this.#kept.delete(anchorId);
    }
    if ((this.#users[callId] ?? 0) > 0) this.#kept.set(callId, rendering);
    return { tokens: rendering.tokens, blockHashes: rendering.blockHashes };
  }

  /** Renderings currently kept (for tests). */
  get keptCount(): number {
    return this.#kept.size;
  }
}
