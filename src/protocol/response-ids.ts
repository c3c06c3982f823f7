import { PROGRAM_ID } from "./ids.js";

/*
 * A Responses API response's ID names its program and its call: `resp_<program>_<call>`
 * (the IDs without their prefixes; both are letters and digits). So a later request's
 * previous_response_id tells the edge which program it continues, and which of that
 * program's stored responses, without an index. The program's object is named by
 * tenant, so another tenant's response ID reaches nothing.
 */

const RESPONSE_ID = /^resp_([0-9A-Za-z]{8,64})_([0-9A-Za-z]{1,64})$/;

export function responseIdFor(programId: string, callId: string): string {
  return `resp_${programId.replace(/^prog_/, "")}_${callId.replace(/^call_/, "")}`;
}

/** The program and call a response ID names; undefined when it is not one of ours. */
export function parseResponseId(id: string): { programId: string; callId: string } | undefined {
  const match = RESPONSE_ID.exec(id);
  if (!match) return undefined;
  const programId = `prog_${match[1]}`;
  return PROGRAM_ID.test(programId) ? { programId, callId: `call_${match[2]}` } : undefined;
}
