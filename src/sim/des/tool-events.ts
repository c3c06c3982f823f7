/*
 * What the pool learns about a simulated program's tools, for TAO's readiness
 * predictor. The workload knows each tool phase exactly (a call becomes ready
 * `gapBeforeMs` after its last dependency finished); the pool may only see:
 *
 * - always: the completed call's response naming its tool calls, with arguments
 *   (OpenAI tool_calls). The tool name is the workload kind's (one tool per kind:
 *   the generators draw every tool time from one distribution, so per-tool and
 *   global history would say the same). Arguments carry no wait, except that a share
 *   of coding-agent tool runs (`sleepArgumentShare`) is given a synthetic
 *   `sleep N` command, N a random 50-100 % of the real tool time (the rest is the
 *   command's own work): the readiness path that reads arguments gets exercised, and
 *   its estimate is good but not exact. Synthetic: the reference traces publish no
 *   argument text;
 * - for a share of programs (`eventShare`), the client's own tool-started event at
 *   the call's completion and tool-finished event when the tool ends. The simulated
 *   client calls the model the instant its tool ends, so tool-finished arrives with
 *   the next call: it confirms, it gives no lead time. The other programs are
 *   clients that send no events; the predictor falls back on the observed gap.
 *
 * Deterministic: every choice is a hash of the program's content seed and the call.
 */

import { deriveSeed } from "../workload/prng.js";
import type { AgentKind } from "../workload/kinds.js";
import type { CallSpec, ProgramSpec } from "../workload/program-spec.js";

export interface ToolEventSettings {
  /** Share of programs whose client sends tool-started / tool-finished events (0..1). */
  eventShare: number;
  /** Share of coding-agent tool runs whose arguments hold a `sleep N` (0..1). */
  sleepArgumentShare: number;
}

export const DEFAULT_TOOL_EVENT_SETTINGS: ToolEventSettings = Object.freeze({ eventShare: 0.5, sleepArgumentShare: 0.2 });

export function validateToolEventSettings(settings: ToolEventSettings): void {
  for (const key of ["eventShare", "sleepArgumentShare"] as const) {
    const value = settings[key];
    if (!(value >= 0 && value <= 1)) throw new RangeError(`${key} must be in [0, 1], got ${value}`);
  }
}

/** The tool a kind's calls wait for. */
export const TOOL_NAMES: Readonly<Record<AgentKind, string>> = Object.freeze({
  chat: "user",
  "function-calling": "web_api",
  "tree-search": "evaluate",
  "coding-agent": "bash",
});

const EVENTS_SALT = 0x7e1;
const SLEEP_SALT = 0x51e;
const SHARE_SALT = 0x5a7;

/** A uniform draw in [0, 1) fixed by the parts. */
function uniform(...parts: number[]): number {
  return deriveSeed(...parts) / 2 ** 32;
}

/** Does this program's client send tool events? */
export function sendsToolEvents(program: ProgramSpec, settings: ToolEventSettings): boolean {
  return uniform(program.contentSeed, EVENTS_SALT) < settings.eventShare;
}

/** The tool call's id as the response would give it. */
export function toolCallId(program: ProgramSpec, call: CallSpec): string {
  return `call_${program.programId}_${call.callId}`;
}

/** The arguments of the tool whose result `call` reads (OpenAI's JSON string). */
export function toolArguments(program: ProgramSpec, call: CallSpec, settings: ToolEventSettings): string {
  switch (program.kind) {
    case "coding-agent": {
      if (uniform(program.contentSeed, SLEEP_SALT, call.callId) < settings.sleepArgumentShare) {
        const share = 0.5 + 0.5 * uniform(program.contentSeed, SHARE_SALT, call.callId);
        const seconds = Math.floor((call.gapBeforeMs * share) / 100) / 10;
        return JSON.stringify({ command: `sleep ${seconds} && ./run_checks.sh` });
      }
      return JSON.stringify({ command: "./run_checks.sh" });
    }
    case "function-calling":
      return JSON.stringify({ query: `step ${call.callId}` });
    case "tree-search":
      return JSON.stringify({ candidate: call.callId });
    case "chat":
      return "{}";
  }
}
