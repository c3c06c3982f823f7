import { Hono } from "hono";
import type { HTTPException } from "hono/http-exception";
import { openAIError } from "../../protocol/errors.js";
import { Header } from "../../protocol/headers.js";
import { EndThreadBody } from "../../protocol/threads.js";
import { newProgramId } from "../../protocol/ids.js";
import type { EdgeEnv } from "../context.js";
import { limiterMisuse, limitExceeded, tenantLimiter } from "../limiter/access.js";
import { readJsonBody } from "../http/body.js";
import { parseProgramId, parseThreadName, programNotFound, programSession, startProgram } from "../program/access.js";
import { sendProgramEndedHints, sendThreadEndedHints } from "../program/end-hints.js";
import type { EndThreadResult } from "../program/types.js";
import { programView, threadView } from "../program/view.js";

/** POST/GET/DELETE /v1/programs, DELETE /v1/programs/{id}/threads/{thread}: a tenant's programs. Mounted behind tenant auth. */
export function programRoutes() {
  const programs = new Hono<EdgeEnv>();

  /** Starts a program, within the tenant's active-programs limit. */
  programs.post("/", async (c) => {
    const { tenant } = c.var;
    const now = Date.now();
    const programId = newProgramId();
    const limiter = tenantLimiter(c.env, tenant.id);
    const admitted = await limiter.admitProgram({ programId, now, limits: tenant.limits });
    if (!admitted.ok) {
      if (admitted.refusal === "invalid_input") throw limiterMisuse(admitted.detail);
      throw limitExceeded(admitted.refusal, await limiter.peek({ now, limits: tenant.limits }));
    }
    let started: Awaited<ReturnType<typeof startProgram>>;
    try {
      started = await startProgram(c.env, tenant.id, now, programId);
    } catch (error) {
      await limiter.releaseProgram({ programId }).catch(() => undefined);
      throw error;
    }
    c.header(Header.program, programId);
    return c.json(programView(started.state), 201);
  });

  programs.get("/:programId", async (c) => {
    const programId = parseProgramId(c.req.param("programId"), "program_id");
    const state = await programSession(c.env, c.var.tenant.id, programId).state();
    if (!state || state.tenantId !== c.var.tenant.id) throw programNotFound(programId);
    c.header(Header.program, programId);
    return c.json(programView(state));
  });

  /** Ends the program (idempotent): its figures become final in D1. */
  programs.delete("/:programId", async (c) => {
    const programId = parseProgramId(c.req.param("programId"), "program_id");
    const ended = await programSession(c.env, c.var.tenant.id, programId).end({ now: Date.now() });
    if (!ended.ok || ended.state.tenantId !== c.var.tenant.id) throw programNotFound(programId);
    // Its pools may evict its KV first: after the answer, never failing it.
    const background = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
    background(sendProgramEndedHints(c.env, { tenantId: c.var.tenant.id, programId, reason: "ended", pools: ended.servedBy }, background));
    c.header(Header.program, programId);
    return c.json(programView(ended.state));
  });

  /**
   * Ends one thread (a branch the agent abandoned or merged; idempotent): the pools
   * that hold its context may evict it first. A later call on the thread reopens it at
   * a new context generation.
   */
  programs.delete("/:programId/threads/:thread", async (c) => {
    const programId = parseProgramId(c.req.param("programId"), "program_id");
    const thread = parseThreadName(c.req.param("thread"), "thread");
    const { outcome } = await readJsonBody(c.req.raw, EndThreadBody, { maxBytes: c.var.config.maxBodyBytes, emptyAsObject: true });
    const ended = await programSession(c.env, c.var.tenant.id, programId).endThread({ thread, outcome, now: Date.now() });
    if (!ended.ok) throw threadEndRefusal(ended.error, programId, thread);
    if (ended.tenantId !== c.var.tenant.id) throw programNotFound(programId);
    // Its pools may evict its context first: after the answer, never failing it.
    const background = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
    const target = { tenantId: c.var.tenant.id, programId, thread, generation: ended.generation, outcome: ended.thread.endOutcome ?? outcome };
    background(sendThreadEndedHints(c.env, { ...target, pools: ended.servedBy }, background));
    c.header(Header.program, programId);
    return c.json({ object: "program.thread" as const, program_id: programId, ...threadView(ended.thread) });
  });

  return programs;
}

function threadEndRefusal(error: Extract<EndThreadResult, { ok: false }>["error"], programId: string, thread: string): HTTPException {
  switch (error) {
    case "not_found":
      return programNotFound(programId);
    case "unknown_thread":
      return openAIError(404, `Thread "${thread}" not found in program ${programId}.`, { code: "thread_not_found", param: "thread" });
    case "ended":
      return openAIError(409, `Program ${programId} has ended; its threads ended with it.`, { code: "program_ended" });
    case "expired":
      return openAIError(409, `Program ${programId} expired after being idle; its threads ended with it.`, { code: "program_expired" });
    // The route sends no ifUnchanged, so a thread_changed is the object's bug.
    case "thread_changed":
    case "invalid_input":
      return openAIError(500, "Internal error: the program refused the thread's bookkeeping.", { code: "internal_error" });
  }
}
