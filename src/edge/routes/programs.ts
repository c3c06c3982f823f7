import { Hono } from "hono";
import { Header } from "../../protocol/headers.js";
import { newProgramId } from "../../protocol/ids.js";
import type { EdgeEnv } from "../context.js";
import { limiterMisuse, limitExceeded, tenantLimiter } from "../limiter/access.js";
import { parseProgramId, programNotFound, programSession, startProgram } from "../program/access.js";
import { sendProgramEndedHints } from "../program/end-hints.js";
import { programView } from "../program/view.js";

/** POST/GET/DELETE /v1/programs: a tenant's programs. Mounted behind tenant auth. */
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

  return programs;
}
