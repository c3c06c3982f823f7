import type { EngineEvent, EngineModel, FinishedEvent, KvPull } from "../../src/sim/engine-model.js";
import type { EngineProfile } from "../../src/sim/profiles.js";
import { LLAMA_31_8B_H100 } from "../../src/sim/profiles.js";

/** `count` distinct prompt tokens starting at `from` (4 characters each, like tokenize()). */
export function tokens(count: number, from = 0, tag = "t"): string[] {
  return Array.from({ length: count }, (_, i) => `${tag}${(from + i).toString(36).padStart(3, "0")}`.slice(0, 4));
}

/** A tiny engine whose KV cache runs out quickly. */
export function smallProfile(kvBlocks: number, overrides: Partial<EngineProfile> = {}): EngineProfile {
  return { ...LLAMA_31_8B_H100, name: "test-small", kvBlocks, maxModelLen: kvBlocks * 16, ...overrides };
}

export interface Drained {
  events: EngineEvent[];
  durations: number[];
  endMs: number;
  /** Generated token indices per request, in emission order. */
  emitted: Map<string, number[]>;
  /** KV pulls the engine started (remote-KV requests). */
  pulls: KvPull[];
}

/** Runs steps back to back (virtual time) until the model is idle; with nothing to run, jumps to its next wake (a KV pull's end). */
export function drain(model: EngineModel, startMs = 0, maxSteps = 1_000_000): Drained {
  const events: EngineEvent[] = [];
  const durations: number[] = [];
  const emitted = new Map<string, number[]>();
  const pulls: KvPull[] = [];
  let now = startMs;
  for (let i = 0; i < maxSteps; i++) {
    const d = model.startStep(now);
    pulls.push(...model.takeKvPulls());
    if (d === undefined) {
      const wake = model.nextWakeMs();
      if (wake === undefined) return { events, durations, endMs: now, emitted, pulls };
      now = Math.max(now, wake);
      continue;
    }
    durations.push(d);
    now += d;
    events.push(
      ...model.finishStep((id, index) => {
        const list = emitted.get(id) ?? [];
        list.push(index);
        emitted.set(id, list);
      }),
    );
  }
  throw new Error("model did not become idle");
}

export function finishedOf(events: EngineEvent[], id: string): FinishedEvent {
  const event = events.find((e): e is FinishedEvent => e.type === "finished" && e.requestId === id);
  if (!event) throw new Error(`request ${id} did not finish`);
  return event;
}
