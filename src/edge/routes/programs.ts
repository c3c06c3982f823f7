import { Hono } from "hono";
import { Header } from "../../protocol/headers.js";
import type { EdgeEnv } from "../context.js";
import { parseProgramId, programNotFound, programSession, startProgram } from "../program/access.js";
import { programView } from "../program/view.js";

/** POST/GET/DELETE /v1/programs: a tenant's programs. Mounted behind tenant auth. */
export function programRoutes() {
  const programs = new Hono<EdgeEnv>();

  programs.post("/", async (c) => {
    const { programId, state } = await startProgram(c.env, c.var.tenant.id, Date.now());
    c.header(Header.program, programId);
    return c.json(programView(state), 201);
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
    c.header(Header.program, programId);
    return c.json(programView(ended.state));
  });

  return programs;
}
