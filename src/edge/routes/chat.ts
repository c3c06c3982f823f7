import { Hono } from "hono";
import { ChatCompletionRequest } from "../../protocol/chat.js";
import { invalidRequest } from "../../protocol/errors.js";
import { Header } from "../../protocol/headers.js";
import { newCallId } from "../../protocol/ids.js";
import { estimatePromptTokens } from "../../protocol/tokens.js";
import { forwardToPool } from "../chat/pool-client.js";
import { type ForwardedCall, relayJson, relayPoolError, relayStream, unanswered } from "../chat/relay.js";
import type { EdgeEnv } from "../context.js";
import { parseJsonBytes, readBodyWithin } from "../http/body.js";
import {
  beginRefusal,
  parseProgramId,
  programSession,
  startProgram,
  threadFromHeaders,
} from "../program/access.js";
import type { SettleCallInput } from "../program/types.js";

/**
 * Priority figures travel as whole milliseconds: plenty for scheduling, and
 * String() of a float could take exponent form, which the pool's header parser
 * (and so the signature check) would refuse.
 */
const wholeMs = (value: number) => Math.round(value);

/** POST /v1/chat/completions. Mounted behind tenant auth. */
export function chatRoutes() {
  const chat = new Hono<EdgeEnv>();

  chat.post("/chat/completions", async (c) => {
    const { config, tenant } = c.var;
    // Everything the client sent is checked before any state is touched.
    const body = await readBodyWithin(c.req.raw, config.maxBodyBytes);
    const parsed = ChatCompletionRequest.safeParse(parseJsonBytes(body));
    if (!parsed.success) throw invalidRequest(parsed.error);
    const request = parsed.data;
    const choice = threadFromHeaders(c.req.raw.headers);
    const requestedProgram = c.req.header(Header.program);
    const programId = requestedProgram === undefined ? undefined : parseProgramId(requestedProgram, Header.program);

    const now = Date.now();
    const program = programId
      ? { programId, session: programSession(c.env, tenant.id, programId) }
      : await startProgram(c.env, tenant.id, now);
    const callId = newCallId();
    const begun = await program.session.beginCall({
      callId,
      thread: choice.thread,
      ...(choice.parentThread ? { parentThread: choice.parentThread } : {}),
      model: request.model,
      now,
    });
    if (!begun.ok) throw beginRefusal(begun.error, program.programId, choice);

    // From here on the call is in flight: every path below settles it exactly once.
    const call: ForwardedCall = {
      programId: program.programId,
      callId,
      sentAt: Date.now(),
      promptEstimate: estimatePromptTokens(request),
      includeUsage: request.stream_options?.include_usage === true,
      settle: (settlement) => {
        const settle = async () => {
          const input: SettleCallInput = await settlement;
          const result = await program.session.settleCall(input);
          if (!result.settled && result.reason !== "already_settled") {
            console.error(`settling ${callId} was refused: ${result.reason}`, "detail" in result ? result.detail : "");
          }
        };
        c.executionCtx.waitUntil(settle().catch((error: unknown) => console.error(`settling ${callId} failed`, error)));
      },
    };
    const clientSignal = c.req.raw.signal;
    let pool: Response;
    try {
      pool = await forwardToPool({
        poolUrl: config.poolUrl,
        signingSecret: config.poolSigningSecret,
        fields: {
          tenant: tenant.id,
          program: program.programId,
          thread: choice.thread,
          call: callId,
          serviceMs: wholeMs(begun.serviceMs),
          pathMs: wholeMs(begun.pathMs),
          waitMs: wholeMs(begun.waitMs),
          engine: begun.engine,
          weight: tenant.weight,
          ts: call.sentAt,
        },
        body,
        signal: clientSignal,
      });
    } catch (error) {
      if (!clientSignal.aborted) console.error(`pool unreachable for ${callId}`, error);
      return unanswered(call, clientSignal.aborted);
    }
    if (!pool.ok) return relayPoolError(pool, call);
    if (request.stream === true) return relayStream(pool, call);
    return relayJson(pool, call, clientSignal);
  });

  return chat;
}
