import { sql } from "drizzle-orm";
import { usage } from "../db/schema.js";

/** The billed figures of a set of usage rows, as SQL aggregates. */
export const usageFigures = {
  calls: sql<number>`count(${usage.callId})`.mapWith(Number),
  promptTokens: sql<number>`coalesce(sum(${usage.promptTokens}), 0)`.mapWith(Number),
  cachedTokens: sql<number>`coalesce(sum(${usage.cachedTokens}), 0)`.mapWith(Number),
  completionTokens: sql<number>`coalesce(sum(${usage.completionTokens}), 0)`.mapWith(Number),
  serviceMs: sql<number>`coalesce(sum(${usage.serviceMs}), 0)`.mapWith(Number),
};

export interface UsageFigures {
  calls: number;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  serviceMs: number;
}

/** Service is a sum of floats: shown to the microsecond so equal ledgers print equal figures. */
const roundMs = (ms: number) => Math.round(ms * 1000) / 1000;

/** The figures as the API shows them (snake_case, like OpenAI's usage objects). */
export function figuresView(f: UsageFigures) {
  return {
    calls: f.calls,
    prompt_tokens: f.promptTokens,
    cached_tokens: f.cachedTokens,
    completion_tokens: f.completionTokens,
    total_tokens: f.promptTokens + f.completionTokens,
    service_ms: roundMs(f.serviceMs),
  };
}
export type FiguresView = ReturnType<typeof figuresView>;
