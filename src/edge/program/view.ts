import type { ToolsState } from "./tool-store.js";
import type { ProgramState, ThreadState } from "./types.js";

/** A program's tool state as the public API shows it. */
export function toolsView(tools: ToolsState) {
  return {
    in_flight: tools.inFlight.map((run) => ({
      tool: run.tool,
      tool_call_id: run.toolCallId,
      thread: run.thread,
      started_at: run.startedAt,
      expected_duration_ms: run.expectedDurationMs,
      deadline: run.deadline,
    })),
    last_started_at: tools.lastStartedAt,
    last_finished_at: tools.lastFinishedAt,
    threads: tools.threads.map((t) => ({ name: t.thread, last_started_at: t.lastStartedAt, last_finished_at: t.lastFinishedAt })),
    events: { tool_started: tools.events.started, tool_finished: tools.events.finished },
  };
}

/** A program's thread as the public API shows it. */
export function threadView(t: ThreadState) {
  return {
    name: t.name,
    parent: t.parent,
    in_flight: t.inFlight,
    calls: t.calls,
    service_ms: t.serviceMs,
    /** Bumped when a call no longer extended the thread's previous one (history compacted or rewritten), or reopened an ended thread. */
    context_generation: t.contextGeneration,
    /** When the agent ended it (DELETE …/threads/{thread}); null while open. */
    ended_at: t.endedAt,
    /** abandoned | merged, as the agent said; null while open. */
    outcome: t.endOutcome,
  };
}
export type ThreadView = ReturnType<typeof threadView>;

/** A program as the public API shows it (snake_case, like OpenAI's objects). */
export function programView(state: ProgramState) {
  return {
    id: state.id,
    object: "program" as const,
    status: state.status,
    created_at: state.createdAt,
    ended_at: state.endedAt,
    last_activity_at: state.lastActivityAt,
    /** PLAS: total service the program's calls received (ms). */
    service_ms: state.serviceMs,
    /** ATLAS: the program's critical-path service (ms). */
    path_ms: state.pathMs,
    wait_ms: state.waitMs,
    /** Engine that served the program last (cache affinity), or null. */
    engine: state.engine === "" ? null : state.engine,
    in_flight: state.inFlight,
    totals: {
      calls: state.totals.calls,
      prompt_tokens: state.totals.promptTokens,
      cached_tokens: state.totals.cachedTokens,
      completion_tokens: state.totals.completionTokens,
    },
    threads: state.threads.map(threadView),
    tools: toolsView(state.tools),
  };
}
export type ProgramView = ReturnType<typeof programView>;
