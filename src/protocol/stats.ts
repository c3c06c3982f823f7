import { z } from "zod";
import { Header } from "./headers.js";
import { eventComments, formatEvent } from "./sse.js";

/** What the pool reports about one call it served. */
export const PoolCallStats = z.object({
  engine: z.string(),
  queueMs: z.number().nonnegative(),
  serviceMs: z.number().nonnegative(),
});
export type PoolCallStats = z.infer<typeof PoolCallStats>;

const COMMENT_TAG = "agentix ";

/** The SSE comment event the pool writes just before `data: [DONE]`. */
export function statsCommentEvent(stats: PoolCallStats): string {
  return formatEvent(`: ${COMMENT_TAG}${JSON.stringify(stats)}`);
}

/** Reads the stats from an event if it is the pool's stats comment. */
export function parseStatsEvent(event: string): PoolCallStats | undefined {
  for (const comment of eventComments(event)) {
    if (!comment.startsWith(COMMENT_TAG)) continue;
    try {
      const parsed = PoolCallStats.safeParse(JSON.parse(comment.slice(COMMENT_TAG.length)));
      if (parsed.success) return parsed.data;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

export function statsHeaders(stats: PoolCallStats): Record<string, string> {
  return {
    [Header.engine]: stats.engine,
    [Header.queueMs]: String(stats.queueMs),
    [Header.serviceMs]: String(stats.serviceMs),
  };
}

export function statsFromHeaders(headers: Headers): PoolCallStats | undefined {
  const parsed = PoolCallStats.safeParse({
    engine: headers.get(Header.engine) ?? undefined,
    queueMs: Number(headers.get(Header.queueMs) ?? Number.NaN),
    serviceMs: Number(headers.get(Header.serviceMs) ?? Number.NaN),
  });
  return parsed.success ? parsed.data : undefined;
}
