import type { ProgramState } from "./types.js";

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
    threads: state.threads.map((t) => ({
      name: t.name,
      parent: t.parent,
      in_flight: t.inFlight,
      calls: t.calls,
      service_ms: t.serviceMs,
    })),
  };
}
export type ProgramView = ReturnType<typeof programView>;
