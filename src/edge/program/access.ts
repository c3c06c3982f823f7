import type { HTTPException } from "hono/http-exception";
import { openAIError } from "../../protocol/errors.js";
import { DEFAULT_THREAD, Header } from "../../protocol/headers.js";
import { newProgramId, PROGRAM_ID, THREAD_NAME } from "../../protocol/ids.js";
import type { Env } from "../env.js";
import type { ProgramSession } from "./session.js";
import type { BeginCallResult } from "./types.js";

/** The program's Durable Object. The name binds it to the tenant: a foreign ID reaches an empty object. */
export function programSession(env: Env, tenantId: string, programId: string): DurableObjectStub<ProgramSession> {
  return env.PROGRAM_SESSION.get(env.PROGRAM_SESSION.idFromName(`${tenantId}:${programId}`));
}

/** The one answer for an unknown program and for another tenant's: nothing tells them apart. */
export function programNotFound(programId: string): HTTPException {
  return openAIError(404, `Program ${programId} not found.`, { code: "program_not_found" });
}

/** A program ID from a header or path, refused with 400 when it cannot be one. */
export function parseProgramId(value: string, param: string): string {
  if (!PROGRAM_ID.test(value)) {
    throw openAIError(400, `Invalid program ID in ${param}: expected prog_ followed by 8–64 letters or digits.`, {
      code: "invalid_program_id",
      param,
    });
  }
  return value;
}

export interface ThreadChoice {
  thread: string;
  /** Present when the call forks `thread` off this existing thread. */
  parentThread?: string;
}

/** A thread name from a header or path, refused with 400 when it cannot be one. */
export function parseThreadName(value: string, param: string): string {
  if (!THREAD_NAME.test(value)) {
    throw openAIError(400, `Invalid thread name in ${param}: use 1–64 letters, digits, or . _ : -`, {
      code: "invalid_thread",
      param,
    });
  }
  return value;
}

export function threadFromHeaders(headers: Headers): ThreadChoice {
  const thread = parseThreadName(headers.get(Header.thread) ?? DEFAULT_THREAD, Header.thread);
  const parent = headers.get(Header.parentThread);
  if (parent === null) return { thread };
  return { thread, parentThread: parseThreadName(parent, Header.parentThread) };
}

type BeginRefusal = Extract<BeginCallResult, { ok: false }>["error"];

/** Turns a refused beginCall into the client's error. */
export function beginRefusal(error: BeginRefusal, programId: string, choice: ThreadChoice): HTTPException {
  switch (error) {
    case "not_found":
      return programNotFound(programId);
    case "ended":
      return openAIError(409, `Program ${programId} has ended; omit ${Header.program} to start a new one.`, {
        code: "program_ended",
        param: Header.program,
      });
    case "expired":
      return openAIError(409, `Program ${programId} expired after being idle; omit ${Header.program} to start a new one.`, {
        code: "program_expired",
        param: Header.program,
      });
    case "unknown_parent":
      return openAIError(400, `Parent thread "${choice.parentThread}" does not exist in program ${programId}.`, {
        code: "unknown_parent_thread",
        param: Header.parentThread,
      });
    case "parent_mismatch":
      return openAIError(
        400,
        `Thread "${choice.thread}" already exists in program ${programId} with a different parent than "${choice.parentThread}".`,
        { code: "parent_thread_mismatch", param: Header.parentThread },
      );
    case "duplicate_call":
      return openAIError(500, "Call ID collision; retry the request.", { code: "call_id_collision" });
    case "invalid_input":
      return openAIError(500, "Internal error: the program refused the call's bookkeeping.", {
        code: "internal_error",
      });
  }
}

/** Starts a new program for the tenant; resolves once it exists in its object and in D1. */
export async function startProgram(env: Env, tenantId: string, now: number, programId: string = newProgramId()) {
  const session = programSession(env, tenantId, programId);
  const state = await session.create({ tenantId, programId, now });
  return { programId, session, state };
}
