import { z } from "zod";
import { Usage } from "../../protocol/chat.js";
import { eventData, isDoneEvent } from "../../protocol/sse.js";
import { type PoolCallStats, parseStatsEvent } from "../../protocol/stats.js";

/** Just what the edge reads from a chunk; anything else in it is relayed untouched. */
const ChunkView = z.looseObject({
  choices: z
    .array(
      z.looseObject({
        delta: z
          .looseObject({
            content: z.string().nullish(),
            reasoning_content: z.string().nullish(),
            tool_calls: z.array(z.unknown()).nullish(),
          })
          .nullish(),
      }),
    )
    .optional(),
  usage: Usage.nullish(),
});
type ChunkView = z.infer<typeof ChunkView>;

function carriesOutput(chunk: ChunkView): boolean {
  return (chunk.choices ?? []).some(({ delta }) =>
    Boolean(delta?.content || delta?.reasoning_content || (delta?.tool_calls && delta.tool_calls.length > 0)),
  );
}

function readChunk(data: string): ChunkView | undefined {
  try {
    const parsed = ChunkView.safeParse(JSON.parse(data));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Decides, event by event, what of the pool's stream reaches the client, and
 * remembers what the edge needs to settle the call: the pool's stats comment is
 * taken out, the usage-only chunk is kept only if the client asked for it
 * (stream_options.include_usage; the pool always asks the engine for usage),
 * and everything else (chunks, other comments, `data: [DONE]`) passes unchanged.
 */
export class SseRelayFilter {
  usage: Usage | undefined;
  stats: PoolCallStats | undefined;
  /** Chunks relayed that carried generated output: the completion-token estimate if the stream is cut. */
  outputChunks = 0;
  sawDone = false;

  constructor(private readonly includeUsage: boolean) {}

  /** The event to pass on, or undefined to drop it. */
  pass(event: string): string | undefined {
    const stats = parseStatsEvent(event);
    if (stats) {
      this.stats = stats;
      return undefined;
    }
    if (isDoneEvent(event)) {
      this.sawDone = true;
      return event;
    }
    const data = eventData(event);
    const chunk = data === undefined ? undefined : readChunk(data);
    if (!chunk) return event;
    if (chunk.usage) this.usage = chunk.usage;
    if (chunk.choices?.length === 0 && chunk.usage && !this.includeUsage) return undefined;
    if (carriesOutput(chunk)) this.outputChunks += 1;
    return event;
  }
}
