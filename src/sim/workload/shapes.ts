import { compileDistribution, type Distribution, type Sampler } from "./distribution.js";
import type { CodingAgentParams, FanOutMode, TreeSearchParams } from "./kinds.js";
import type { Rng } from "./prng.js";
import { type CallListBuilder, type CallSpec, turnTokens } from "./program-spec.js";
import type { MixEntry } from "./schema.js";

/*
 * The call graph of each kind. Samplers are compiled once per mix entry; a shape
 * then draws one program from its own PRNG stream.
 *
 * - chat: a chain; each call re-sends the whole conversation.
 * - function calling / coding agent: steps. After each step the model asks for
 *   `fanOut` tool calls; in "threads" mode each result gets its own LLM call on its
 *   own thread and the next step joins them, in "tools" mode one LLM call reads all
 *   results after the slowest tool. The coding agent's first prompt is long and its
 *   context is compacted at the cap.
 * - tree search (LATS): each iteration expands one node into `childrenPerExpansion`
 *   parallel calls whose context is the node's path; the next iteration waits for
 *   all of them (evaluation and backpropagation), then selects a new node.
 */

export type ProgramShape = (rng: Rng, out: CallListBuilder) => void;

const count = (sample: Sampler): Sampler => (rng) => Math.max(1, Math.round(sample(rng)));
const millis = (sample: Sampler): Sampler => (rng) => Math.max(0, sample(rng)) * 1_000;
const countOf = (d: Distribution) => count(compileDistribution(d));

function chainShape(params: { callsPerProgram: Distribution; newPromptTokens: Distribution; outputTokens: Distribution; gapSec: Distribution }): ProgramShape {
  const calls = countOf(params.callsPerProgram);
  const newPrompt = countOf(params.newPromptTokens);
  const output = countOf(params.outputTokens);
  const gap = millis(compileDistribution(params.gapSec));
  return (rng, out) => {
    const n = calls(rng);
    const context: number[] = [];
    let contextTokens = 0;
    let previous: CallSpec | undefined;
    for (let i = 0; i < n; i++) {
      const call = out.add({
        thread: "main",
        dependsOn: previous === undefined ? [] : [previous.callId],
        gapBeforeMs: previous === undefined ? 0 : gap(rng),
        toolCalls: 0,
        contextCallIds: context.slice(),
        contextTokens,
        newPromptTokens: newPrompt(rng),
        outputTokens: output(rng),
      });
      context.push(call.callId);
      contextTokens += turnTokens(call);
      previous = call;
    }
  };
}

interface StepParams {
  callsPerProgram: Distribution;
  newPromptTokens: Distribution;
  outputTokens: Distribution;
  gapSec: Distribution;
  fanOut: Distribution;
  fanOutMode: FanOutMode;
  systemPromptTokens: number;
  /** Coding agent only. */
  firstPromptTokens?: Distribution;
  contextCapTokens?: number;
  compactToFraction?: number;
}

const branchThread = (k: number) => (k === 0 ? "main" : `branch-${k}`);

function stepShape(params: StepParams): ProgramShape {
  const calls = countOf(params.callsPerProgram);
  const newPrompt = countOf(params.newPromptTokens);
  const firstPrompt = params.firstPromptTokens === undefined ? newPrompt : countOf(params.firstPromptTokens);
  const output = countOf(params.outputTokens);
  const gap = millis(compileDistribution(params.gapSec));
  const fanOut = countOf(params.fanOut);
  const cap = params.contextCapTokens ?? Infinity;
  const compactTo = cap * (params.compactToFraction ?? 1);
  const system = params.systemPromptTokens;

  return (rng, out) => {
    const total = calls(rng);
    const first = out.add({
      thread: "main",
      dependsOn: [],
      gapBeforeMs: 0,
      toolCalls: 0,
      contextCallIds: [],
      contextTokens: 0,
      newPromptTokens: Math.max(1, Math.min(firstPrompt(rng), cap - system - 1)),
      outputTokens: output(rng),
    });
    // The conversation every next step re-sends; compaction keeps the first prompt.
    let conversation: CallSpec[] = [first];
    let conversationTokens = turnTokens(first);
    let previousStep: number[] = [first.callId];

    /**
     * Drops the oldest steps when the next prompt would pass the cap (the first
     * prompt too, only if it alone no longer fits); returns the new prompt size.
     */
    const fit = (newTokens: number): number => {
      if (system + conversationTokens + newTokens <= cap) return newTokens;
      const pinned = conversation[0] === first ? 1 : 0;
      let keepFrom = pinned;
      while (keepFrom < conversation.length && system + conversationTokens + newTokens > compactTo) {
        conversationTokens -= turnTokens(conversation[keepFrom] as CallSpec);
        keepFrom++;
      }
      conversation = pinned === 1 ? [first, ...conversation.slice(keepFrom)] : conversation.slice(keepFrom);
      if (system + conversationTokens + 1 > cap) {
        conversation = [];
        conversationTokens = 0;
      }
      return Math.max(1, Math.min(newTokens, cap - system - conversationTokens));
    };

    let made = 1;
    while (made < total) {
      const tools = fanOut(rng);
      const width = params.fanOutMode === "tools" ? 1 : Math.min(tools, total - made);
      const step: CallSpec[] = [];
      // Every call of the step sees the conversation as it was before the step.
      const requested: number[] = [];
      for (let k = 0; k < width; k++) requested.push(newPrompt(rng));
      const largest = Math.max(...requested);
      const fitted = fit(largest);
      const contextCallIds = conversation.map((call) => call.callId);
      for (let k = 0; k < width; k++) {
        let gapMs = gap(rng);
        if (params.fanOutMode === "tools") for (let t = 1; t < tools; t++) gapMs = Math.max(gapMs, gap(rng));
        step.push(
          out.add({
            thread: branchThread(k),
            dependsOn: previousStep,
            gapBeforeMs: gapMs,
            toolCalls: params.fanOutMode === "tools" ? tools : 1,
            contextCallIds,
            contextTokens: conversationTokens,
            newPromptTokens: Math.min(requested[k] as number, fitted),
            outputTokens: output(rng),
          }),
        );
      }
      for (const call of step) {
        conversation.push(call);
        conversationTokens += turnTokens(call);
      }
      previousStep = step.map((call) => call.callId);
      made += width;
    }
  };
}

interface TreeNode {
  depth: number;
  /** Calls from the root to this node, inclusive: the context of its children. */
  path: number[];
  pathTokens: number;
}

function treeSearchShape(params: TreeSearchParams): ProgramShape {
  const iterations = countOf(params.iterations);
  const newPrompt = countOf(params.newPromptTokens);
  const output = countOf(params.outputTokens);
  const gap = millis(compileDistribution(params.gapSec));
  const { childrenPerExpansion: children, maxDepth, backtrackProbability } = params;

  return (rng, out) => {
    const n = iterations(rng);
    const root: TreeNode = { depth: 0, path: [], pathTokens: 0 };
    /** Unexpanded nodes that may still grow (depth < maxDepth). */
    const open: TreeNode[] = [];
    let parent = root;
    let previousStep: number[] = [];
    for (let it = 0; it < n; it++) {
      const step: TreeNode[] = [];
      const dependsOn = previousStep;
      previousStep = [];
      // LATS samples a node's children from one prompt (one request with n = children),
      // so the siblings send the same new prompt: only the first one's prefill is new work.
      const promptTokens = newPrompt(rng);
      let firstChild: number | undefined;
      for (let k = 0; k < children; k++) {
        const call = out.add({
          thread: branchThread(k),
          dependsOn,
          gapBeforeMs: it === 0 ? 0 : gap(rng),
          toolCalls: it === 0 ? 0 : 1,
          contextCallIds: parent.path,
          contextTokens: parent.pathTokens,
          newPromptTokens: promptTokens,
          ...(firstChild === undefined ? {} : { samePromptAs: firstChild }),
          outputTokens: output(rng),
        });
        firstChild ??= call.callId;
        previousStep.push(call.callId);
        const child: TreeNode = { depth: parent.depth + 1, path: [...parent.path, call.callId], pathTokens: parent.pathTokens + turnTokens(call) };
        if (child.depth < maxDepth) step.push(child);
      }
      open.push(...step);
      // Selection: usually deepen one of the newest children, sometimes backtrack.
      let next: TreeNode | undefined;
      if (step.length > 0 && rng.next() >= backtrackProbability) next = step[rng.int(step.length)];
      else if (open.length > 0) next = open[rng.int(open.length)];
      if (next === undefined) {
        parent = root;
      } else {
        open.splice(open.indexOf(next), 1);
        parent = next;
      }
    }
  };
}

/** The shape of one mix entry's programs. */
export function shapeFor(entry: MixEntry): ProgramShape {
  switch (entry.kind) {
    case "chat":
      return chainShape(entry.params);
    case "function-calling":
      return stepShape(entry.params);
    case "coding-agent":
      return stepShape(entry.params satisfies CodingAgentParams);
    case "tree-search":
      return treeSearchShape(entry.params);
  }
}
