import { Hono } from "hono";
import type { HTTPException } from "hono/http-exception";
import { invalidRequest, openAIError } from "../../protocol/errors.js";
import { Header, RateLimitHeader } from "../../protocol/headers.js";
import { newEventBatchId } from "../../protocol/ids.js";
import { parseToolEventsBody, type ToolEventBatch } from "../../protocol/tool-events.js";
import { sendToolEventsToPool } from "../chat/pool-client.js";
import type { EdgeEnv } from "../context.js";
import { parseJsonBytes, readBodyWithin } from "../http/body.js";
import { limiterMisuse, tenantLimiter } from "../limiter/access.js";
import { retryAfterSeconds } from "../limits/reset-duration.js";
import { parseProgramId, programNotFound, programSession } from "../program/access.js";
import type { RecordToolEventsResult } from "../program/types.js";
import { toolsView } from "../program/view.js";
import { poolSnapshot } from "../pools/directory-cache.js";
import { programPool } from "../pools/routing.js";

type Refusal = Extract<RecordToolEventsResult, { ok: false }>;

function eventsRefusal(refusal: Refusal, programId: string): HTTPException {
  switch (refusal.error) {
    case "not_found":
      return programNotFound(programId);
    case "ended":
      return openAIError(409, `Program ${programId} has ended; it takes no more tool events.`, { code: "program_ended" });
    case "expired":
      return openAIError(409, `Program ${programId} expired after being idle; it takes no more tool events.`, {
        code: "program_expired",
      });
    case "rate_limited":
      return openAIError(
        429,
        `Too many tool events for program ${programId}: the limit is ${refusal.limitPerMinute} per minute. Send fewer, or batch them.`,
        { code: "tool_events_rate_exceeded", headers: { [RateLimitHeader.retryAfter]: String(retryAfterSeconds(refusal.retryAfterMs)) } },
      );
    case "invalid_input":
      return openAIError(500, "Internal error: the program refused the events' bookkeeping.", { code: "internal_error" });
  }
}

/** The tenant-wide cap (all programs together) refused the batch. */
function tenantEventsRefusal(limitPerMinute: number, retryAfterMs: number): HTTPException {
  return openAIError(
    429,
    `Too many tool events across your programs: your plan allows ${limitPerMinute} a minute in total. ` +
      "Send fewer, or batch them.",
    { code: "tool_events_rate_exceeded", headers: { [RateLimitHeader.retryAfter]: String(retryAfterSeconds(retryAfterMs)) } },
  );
}

/**
 * POST /v1/programs/{id}/events: tool started / finished hints (protocol/tool-events.ts).
 * Mounted behind tenant auth. The program's object records them (bounded tool state,
 * activity, a per-program event cap); the accepted batch is then carried to the pool
 * from waitUntil, so the answer does not wait for it, and a pool that cannot be reached
 * costs the client nothing (events are hints). Events do not count toward the tenant's
 * rpm: they use no engine, and counting them would teach clients not to send them.
 * They have a tenant-wide cap instead (toolEventsPerMinute, a bucket in the tenant's
 * limiter), taken before the program's object is asked: one more Durable Object round
 * trip per batch, no more. A batch the program then refuses still counts against it
 * (as any attempt does: probing unknown programs is bounded too).
 */
export function toolEventRoutes() {
  const routes = new Hono<EdgeEnv>();

  routes.post("/:programId/events", async (c) => {
    const { config, tenant } = c.var;
    const programId = parseProgramId(c.req.param("programId"), "program_id");
    // Everything the client sent is checked before any state is touched.
    const parsed = parseToolEventsBody(parseJsonBytes(await readBodyWithin(c.req.raw, config.maxBodyBytes)));
    if (!parsed.success) throw invalidRequest(parsed.error);
    const batch: ToolEventBatch = parsed.data;

    const taken = await tenantLimiter(c.env, tenant.id).admitToolEvents({
      now: Date.now(),
      limits: tenant.limits,
      count: batch.events.length,
    });
    if (!taken.ok) {
      if ("refusal" in taken) throw limiterMisuse(taken.detail);
      throw tenantEventsRefusal(taken.limitPerMinute, taken.retryAfterMs);
    }

    const recorded = await programSession(c.env, tenant.id, programId).recordToolEvents({ events: batch.events, now: Date.now() });
    if (!recorded.ok) throw eventsRefusal(recorded, programId);

    const batchId = newEventBatchId();
    // The events go to the program's pool, where its calls and their KV cache are. A
    // program no engine has served yet has none: its events stay in its object.
    const pool = programPool(await poolSnapshot(c.env, (work) => c.executionCtx.waitUntil(work)), config, recorded.pool);
    if (pool) {
      c.executionCtx.waitUntil(
        sendToolEventsToPool({
          poolUrl: pool.url,
          signingKey: pool.signingKey,
          fields: {
            tenant: tenant.id,
            program: programId,
            // Each event names its own thread; the header carries the first one's.
            thread: batch.events[0]?.thread ?? "main",
            call: batchId,
            serviceMs: 0,
            pathMs: 0,
            waitMs: 0,
            engine: "",
            weight: tenant.weight,
            generation: 0,
            ts: Date.now(),
          },
          batch,
        }).catch((error: unknown) => console.error(`tool events ${batchId} of ${programId} did not reach pool ${pool.id}`, error)),
      );
    }
    c.header(Header.program, programId);
    return c.json(
      { object: "program.tool_events", program_id: programId, accepted: recorded.accepted, tools: toolsView(recorded.tools) },
      202,
    );
  });

  return routes;
}
