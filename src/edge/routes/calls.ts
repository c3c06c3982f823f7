import { type Context, Hono } from "hono";
import { MAX_CONTEXT_MESSAGES } from "../../core/recognition/context-generation.js";
import { prefixHashes } from "../../core/recognition/conversation-index.js";
import { Header, type ProgramSource } from "../../protocol/headers.js";
import { newCallId, newProgramId } from "../../protocol/ids.js";
import type { CallApiSpec, ParsedCall } from "../apis/call-api.js";
import { chatCompletionsApi } from "../apis/chat-completions.js";
import { completionsApi } from "../apis/completions.js";
import { messagesApi } from "../apis/messages.js";
import { responsesApi } from "../apis/responses.js";
import { forwardToPool } from "../chat/pool-client.js";
import { admitAndBegin } from "../chat/admission.js";
import { noteForwarded } from "../instrument/io-counts.js";
import { verifiedProfiles } from "../auth/isolate-cache.js";
import { authRefused, noteKeyUsed, verifyWithLimiter } from "../middleware/tenant-auth.js";
import { CallLifecycle } from "../chat/call-lifecycle.js";
import { sendWithFailover } from "../chat/failover.js";
import { retryIdempotent, SETTLE_RETRY_DELAYS_MS } from "../chat/idempotent-retry.js";
import { type ForwardedCall, noPoolAvailable, relayJson, relayPoolError, relayStream, unanswered } from "../chat/relay.js";
import type { StreamWatch } from "../chat/relay-stream.js";
import type { EdgeEnv } from "../context.js";
import { readBodyWithin } from "../http/body.js";
import { openAIError } from "../../protocol/errors.js";
import { parseResponseId } from "../../protocol/response-ids.js";
import { limiterMisuse, limitExceeded } from "../limiter/access.js";
import { CallLimiter } from "../limiter/sharded-limiter.js";
import { LEASE_RENEW_MS } from "../limiter/tenant-limiter.js";
import { rateLimitHeadersOnResponse } from "../middleware/rate-limit-headers.js";
import { beginRefusal, parseProgramId, programSession, type ThreadChoice, threadFromHeaders } from "../program/access.js";
import { endMergedBranches } from "../program/merged-branches.js";
import { poolSnapshot } from "../pools/directory-cache.js";
import { noteAnsweredLoad, poolsForModel, routeCall } from "../pools/routing.js";
import { parsePoolLoad } from "../../protocol/pool-status.js";
import { countMessageTokens } from "./count-tokens.js";
import { modelNotFound } from "./models.js";

/**
 * Priority figures travel as whole milliseconds: plenty for scheduling, and
 * String() of a float could take exponent form, which the pool's header parser
 * (and so the signature check) would refuse.
 */
const wholeMs = (value: number) => Math.round(value);

/** Cloudflare's guess at the client's continent (absent locally and in tests). */
function clientContinent(request: Request): string | undefined {
  const continent = (request.cf as { continent?: unknown } | undefined)?.continent;
  return typeof continent === "string" ? continent : undefined;
}

/** Refusals of a recognised program after which the call starts a new program instead. */
const RECOGNITION_FALLBACK: ReadonlySet<string> = new Set(["not_found", "ended", "expired", "unknown_parent", "parent_mismatch"]);

/** The tenant's conversation index. */
const programIndex = (env: EdgeEnv["Bindings"], tenantId: string) => env.PROGRAM_INDEX.get(env.PROGRAM_INDEX.idFromName(tenantId));

/** The model-calling APIs and where each is served (under /v1). */
const CALL_APIS: readonly (readonly [path: string, api: CallApiSpec])[] = [
  ["/chat/completions", chatCompletionsApi],
  ["/completions", completionsApi],
  ["/messages", messagesApi],
  ["/responses", responsesApi],
];

/**
 * POST /v1/chat/completions, /v1/completions, /v1/messages and /v1/responses: one pipeline, each
 * API's own shape. Mounted behind tenant auth.
 */
export function callRoutes() {
  const calls = new Hono<EdgeEnv>();
  for (const [path, api] of CALL_APIS) {
    calls.use(path, rateLimitHeadersOnResponse({ anthropic: api.api === "messages" }));
    calls.post(path, async (c) => handleCall(c, api, { bytes: await readBodyWithin(c.req.raw, c.var.config.maxBodyBytes) }));
  }
  calls.post("/messages/count_tokens", (c) => countMessageTokens(c, clientContinent(c.req.raw)));
  return calls;
}

const CALL_PATHS: ReadonlySet<string> = new Set(CALL_APIS.map(([path]) => `/v1${path}`));

/** A model call: its own admission verifies the caller's key (middleware/tenant-auth.ts). */
export const isModelCall = (c: Context<EdgeEnv>): boolean => c.req.method === "POST" && CALL_PATHS.has(c.req.path);

/** One go at a call: its body, and why it is tried again when it is. */
interface CallAttempt {
  bytes: Uint8Array;
  /** The program its conversation pointed to refused it: it starts a new one, that program excluded. */
  recognitionRetry?: { exclude: string };
  /** Its checks ran on a profile that had changed: once only, then it is an error. */
  profileRetry?: true;
}

/** The program a previous_response_id names, and the conversation up to that response; 404 when it is not stored. */
async function continuedConversation(c: Context<EdgeEnv>, responseId: string): Promise<{ programId: string; items: unknown[] }> {
  const notFound = () =>
    openAIError(404, `Previous response with id '${responseId.slice(0, 200)}' not found.`, {
      type: "invalid_request_error",
      code: "previous_response_not_found",
      param: "previous_response_id",
    });
  const named = parseResponseId(responseId);
  if (named === undefined) throw notFound();
  // The object is named by tenant: another tenant's response ID reaches an empty one.
  const found = await programSession(c.env, c.var.tenant.id, named.programId).responseConversation(responseId);
  if (!found.ok) throw notFound();
  return { programId: named.programId, items: JSON.parse(found.itemsJson) as unknown[] };
}

/** What a call is, once checked and placed, before anything is taken for it. */
interface PreparedCall {
  allowed: ParsedCall;
  snapshot: Awaited<ReturnType<typeof poolSnapshot>>;
  eligible: ReturnType<typeof poolsForModel>;
  conversation: string[];
  recognized: Awaited<ReturnType<ReturnType<typeof programIndex>["recognizeCall"]>> | undefined;
  linked: { programId: string; thread: string; parentThread?: string } | undefined;
  existingProgramId: string | undefined;
  programSource: ProgramSource;
  thread: ThreadChoice;
  continued: { programId: string; items: unknown[] } | undefined;
}

/**
 * The call's checks and its program's identity: the body (only the API's fields and the
 * plan's extensions pass), the model (some pool must serve it for this tenant), and the
 * program it joins (header, previous_response_id, or the tenant's conversation index).
 */
async function prepareCall(c: Context<EdgeEnv>, api: CallApiSpec, attempt: CallAttempt): Promise<PreparedCall> {
  const { config, tenant } = c.var;
  // Everything the client sent is checked before any state is touched: only the API's fields and the plan's extensions pass.
  const parsed = api.parse(attempt.bytes, tenant.allowedExtensions);
  const choice = threadFromHeaders(c.req.raw.headers);
  const requestedProgram = c.req.header(Header.program);
  const headerProgramId = requestedProgram === undefined ? undefined : parseProgramId(requestedProgram, Header.program);
  // A call that continues a stored response joins that response's program (unless the header names one).
  const continued = parsed.continues === undefined ? undefined : await continuedConversation(c, parsed.continues);
  const allowed = continued && parsed.withHistory ? parsed.withHistory(continued.items) : parsed;
  // A model no pool serves for this tenant (its plan's models and regions) is refused before any quota is taken.
  const snapshot = await poolSnapshot(c.env, (work) => c.executionCtx.waitUntil(work));
  const eligible = poolsForModel(snapshot, tenant.modelAccess, allowed.model);
  if (eligible.length === 0) throw modelNotFound(allowed.model);
  // Otherwise its conversation may name the program: the tenant's index (recognition/program-index.ts), unless the
  // tenant turned it off; asked after the model check, so a refused call does not mark a reply as continued.
  const conversation = allowed.conversation ?? [];
  const headerKey = config.programKeyHeader === undefined ? undefined : c.req.header(config.programKeyHeader)?.trim().slice(0, 512);
  const sessionKey = headerKey ? `header:${headerKey}` : allowed.sessionKey;
  const inferring = !headerProgramId && !continued && tenant.programInference && (conversation.length > 0 || sessionKey !== undefined);
  const recognized = inferring
    ? await programIndex(c.env, tenant.id).recognizeCall({
        model: allowed.model,
        messages: conversation,
        ...(sessionKey !== undefined ? { sessionKey } : {}),
        ...(attempt.recognitionRetry !== undefined ? { exclude: attempt.recognitionRetry.exclude } : {}),
        newProgramId: newProgramId(),
        now: Date.now(),
      })
    : undefined;
  const linked = recognized !== undefined && recognized.how !== "new" ? recognized : undefined;
  const existingProgramId = headerProgramId ?? continued?.programId ?? linked?.programId;
  const programSource: ProgramSource = headerProgramId ? "header" : continued ? "previous_response_id" : (linked?.how ?? "new");
  const thread: ThreadChoice = linked ? { thread: linked.thread, ...(linked.parentThread ? { parentThread: linked.parentThread } : {}) } : choice;
  return { allowed, snapshot, eligible, conversation, recognized, linked, existingProgramId, programSource, thread, continued };
}

/**
 * One call of any API: checked, admitted (a reservation covering the prompt estimate
 * and the effective limit), begun in its program, sent to a pool (failover before the
 * first byte), relayed, and settled exactly once whichever way it ends.
 */
async function handleCall(c: Context<EdgeEnv>, api: CallApiSpec, attempt: CallAttempt): Promise<Response> {
  const { config, tenant, credential } = c.var;
  // A refusal found before admission, on a profile the limiter has not confirmed for this
  // request: the key is verified first (it may be revoked, the profile may have changed).
  let prepared: PreparedCall;
  try {
    prepared = await prepareCall(c, api, attempt);
  } catch (error) {
    if (credential.verified) throw error;
    await verifyWithLimiter(c, credential.tenantId, credential.keyHash);
    if (c.var.credential.profileVersion !== credential.profileVersion && !attempt.profileRetry) {
      return handleCall(c, api, { ...attempt, profileRetry: true });
    }
    throw error;
  }
  const { allowed, snapshot, eligible, conversation, recognized, linked, existingProgramId, programSource, thread, continued } = prepared;

  // Admission reserves: a request, the prompt estimate + the effective max tokens (decided by the limiter), a lease.
  const now = Date.now();
  const callId = newCallId();
  // Without the header the call starts a program: admitted against the active-programs limit, created by beginCall.
  const programId = existingProgramId ?? recognized?.programId ?? newProgramId();
  const createdProgramId = existingProgramId === undefined ? programId : undefined;
  const promptEstimate = allowed.promptEstimate;
  // One object, or the shards of a sharded tenant (limiter/shards.ts); after admission, the shard that granted the call.
  const callLimiter = new CallLimiter(c.env, tenant.id, tenant.limits);
  const session = programSession(c.env, tenant.id, programId);
  const baseline = config.baselineHotPath;
  // Admission (the limiter, which also verifies the key) and the begin (the program) at once: one round trip.
  const outcome = await admitAndBegin({
    tenantId: tenant.id,
    limiter: callLimiter,
    session,
    sequential: baseline,
    admit: {
      callId,
      now,
      ...(baseline
        ? { limits: tenant.limits }
        : { auth: { tenantId: credential.tenantId, keyHash: credential.keyHash, profileVersion: credential.profileVersion } }),
      promptTokens: promptEstimate,
      ...(allowed.requestedMaxTokens !== undefined ? { maxTokens: allowed.requestedMaxTokens } : {}),
      ...(createdProgramId ? { newProgramId: createdProgramId } : {}),
    },
    // A new program is created by its first call's beginCall; a refused call leaves none.
    begin: {
      ...(createdProgramId ? { newProgram: { tenantId: tenant.id, programId: createdProgramId } } : {}),
      callId,
      thread: thread.thread,
      ...(thread.parentThread ? { parentThread: thread.parentThread } : {}),
      model: allowed.model,
      api: api.api,
      contextHashes: conversation.length <= MAX_CONTEXT_MESSAGES ? prefixHashes(allowed.model, conversation) : [],
      // The tenant's ledger is split like its limiter (ledger/shards.ts).
      ledgerShards: callLimiter.shards,
      now,
    },
  });
  if (outcome.kind === "admission_refused") {
    const admitted = outcome.admitted;
    switch (admitted.refusal) {
      case "invalid_input":
        throw limiterMisuse(admitted.detail);
      case "invalid_key":
      case "plan_missing":
        verifiedProfiles.delete(credential.keyHash);
        throw authRefused(admitted);
      case "profile_changed":
        // Checked against an older copy of the tenant's profile: again, on the current one.
        verifiedProfiles.set(credential.keyHash, { tenant: admitted.tenant, version: admitted.version });
        c.set("tenant", admitted.tenant);
        c.set("credential", { ...credential, profileVersion: admitted.version, verified: true });
        if (attempt.profileRetry) throw openAIError(503, "Your account's settings changed during the request; retry.", { code: "profile_changed" });
        return handleCall(c, api, { ...attempt, profileRetry: true });
      default:
        c.set("rateLimit", admitted.snapshot);
        throw limitExceeded(admitted.refusal, admitted.snapshot, allowed.maxTokensField);
    }
  }
  const admitted = outcome.admitted;
  c.set("rateLimit", admitted.snapshot);
  if (admitted.keyUsed) noteKeyUsed(c, tenant.keyId, now);
  // The bytes signed and sent to the pool: the allowed fields, with the limit the reservation covers.
  const body = allowed.forwardBody(admitted.maxTokens);
  const limiter = callLimiter.granting;

  // The lease is held from here: every path below either cancels it or settles it.
  const cancelAdmission = async (releaseProgramId?: string) => {
    try {
      const cancelled = await callLimiter.cancelLease({
        callId,
        now: Date.now(),
        ...(releaseProgramId ? { releaseProgramId } : {}),
      });
      if (cancelled.snapshot) c.set("rateLimit", cancelled.snapshot);
    } catch (error) {
      console.error(`cancelling the lease of ${callId} failed; it expires on its own`, error);
    }
  };
  if (outcome.kind === "begin_failed") {
    await cancelAdmission(createdProgramId);
    throw outcome.error;
  }
  if (outcome.kind === "begin_refused") {
    await cancelAdmission(createdProgramId);
    const refused = outcome.begun.error;
    // A program its conversation pointed to that has ended (or lost the thread forked from): the call starts a new one.
    if (linked !== undefined && attempt.recognitionRetry === undefined && RECOGNITION_FALLBACK.has(refused)) {
      return handleCall(c, api, { ...attempt, recognitionRetry: { exclude: linked.programId } });
    }
    throw beginRefusal(refused, programId, thread);
  }
  const begun = outcome.begun;
  /**
   * What the index learns from the call's end: its reply (from onFinished) links the call
   * that continues it; a failure (no reply, from the settle) makes a resend a retry.
   */
  const recordInIndex = async (outcome: { reply: string } | { reply?: never }): Promise<void> => {
    if (recognized === undefined || conversation.length === 0) return;
    await programIndex(c.env, tenant.id)
      .recordOutcome({ model: allowed.model, messages: conversation, programId, thread: thread.thread, ...outcome, now: Date.now() })
      .catch((error: unknown) => console.error(`recording ${callId} in the program index failed`, error));
  };

  /** Keeps what the program stores of a finished answer (Responses API), for a later previous_response_id. */
  const keepResponse = async (answer: unknown): Promise<void> => {
    const own = answer === undefined ? undefined : allowed.afterAnswer?.(answer);
    if (own === undefined) return;
    // Continuing another program's response (the header named this one): this program keeps the whole conversation.
    const kept = continued && continued.programId !== programId ? { ...own, parentId: null, items: [...continued.items, ...own.items] } : own;
    await session.recordResponse({ ...kept, now: Date.now() }).then(
      (result) => {
        if (!result.recorded) console.warn(`response ${kept.responseId} of ${programId} was not kept: ${result.reason}`);
      },
      (error: unknown) => console.error(`keeping response ${kept.responseId} of ${programId} failed`, error),
    );
  };

  // From here on the call is in flight: its lifecycle renews the lease, keeps the
  // deadline, and settles it exactly once, whichever way it ends.
  const lifecycle = new CallLifecycle({
    renewEveryMs: LEASE_RENEW_MS,
    timeoutMs: config.callTimeoutMs,
    renewLease: () => limiter.renewLease({ callId, now: Date.now() }),
    keepAlive: (work) => c.executionCtx.waitUntil(work),
    record: async (input) => {
      // A finished call's reply was recorded by onFinished, before its answer ended; any other end tells the index here.
      const indexed = input.status === "ok" ? Promise.resolve() : recordInIndex({});
      // Both settles are idempotent on the call ID, so a transient failure is simply tried again.
      const retryLog = (what: string) => (error: unknown, attempt: number) =>
        console.warn(`settling ${callId} in its ${what} failed (attempt ${attempt}); trying again`, error);
      const [programResult, leaseResult] = await Promise.allSettled([
        retryIdempotent(async () => await session.settleCall(input), SETTLE_RETRY_DELAYS_MS, retryLog("program")),
        retryIdempotent(
          async () =>
            await limiter.settleLease({
              callId,
              tokens: input.promptTokens + input.completionTokens,
              finishedAt: input.finishedAt,
            }),
          SETTLE_RETRY_DELAYS_MS,
          retryLog("limiter"),
        ),
      ]);
      if (programResult.status === "rejected") {
        console.error(`settling ${callId} in its program failed`, programResult.reason);
      } else if (!programResult.value.settled && programResult.value.reason !== "already_settled") {
        const result = programResult.value;
        console.error(`settling ${callId} was refused: ${result.reason}`, "detail" in result ? result.detail : "");
      }
      if (leaseResult.status === "rejected") {
        console.error(`settling the lease of ${callId} failed; it expires on its own`, leaseResult.reason);
      }
      // The forks this call merged go first in their pools, now that its own KV carries its thread's tag.
      const merged = input.status === "ok" ? begun.mergedBranches : [];
      const mergedEnded = merged.length === 0 ? undefined : endMergedBranches(c.env, session, { tenantId: tenant.id, programId }, merged, (work) => c.executionCtx.waitUntil(work));
      await Promise.all([indexed, mergedEnded]);
    },
  });
  // The program's pool first (its KV cache is there), unless it cannot or should not take the call.
  const route = routeCall({
    eligible,
    snapshot,
    config,
    currentPoolId: begun.pool === "" ? undefined : begun.pool,
    continent: clientContinent(c.req.raw),
    now,
  });
  const call: ForwardedCall = {
    programId,
    callId,
    sentAt: Date.now(),
    promptEstimate,
    pool: "",
    programSource,
    // Before the client sees the answer end: an agent's next call (its reply replayed, or
    // previous_response_id naming it) may follow at once and must find both recorded.
    onFinished: ({ answer, reply: streamed }) => {
      const reply = streamed ?? (answer === undefined ? undefined : allowed.replyOf?.(answer));
      const work = Promise.all([reply === undefined ? undefined : recordInIndex({ reply }), keepResponse(answer)]).then(() => undefined);
      c.executionCtx.waitUntil(work);
      return work;
    },
    usageOf: api.usageOf,
    streamFilter: () => api.streamFilter(allowed.includeUsage),
    settle: (settlement) => {
      lifecycle.settle(settlement);
    },
  };
  const watch: StreamWatch = {
    client: c.req.raw.signal,
    deadline: lifecycle.deadline,
    stallMs: config.streamStallMs,
    poolIdleMs: config.poolIdleMs,
  };
  try {
    if (route.pools.length === 0) return noPoolAvailable(call);
    const sent = await sendWithFailover({
      pools: route.pools,
      beforeAttempt: (target) => {
        noteForwarded(c.env);
        call.pool = target.id;
      },
      send: (target) =>
        forwardToPool({
          poolUrl: target.url,
          path: api.poolPath,
          signingKey: target.signingKey,
          fields: {
            tenant: tenant.id,
            program: programId,
            thread: thread.thread,
            call: callId,
            serviceMs: wholeMs(begun.serviceMs),
            pathMs: wholeMs(begun.pathMs),
            waitMs: wholeMs(begun.waitMs),
            // Engine IDs are a pool's own: on another pool the program's engine means nothing.
            engine: target.id === begun.pool ? begun.engine : "",
            weight: tenant.weight,
            generation: begun.contextGeneration,
            ts: Date.now(),
          },
          body,
          // A client that leaves, or the deadline, stops the pool's work too.
          signal: AbortSignal.any([watch.client, watch.deadline]),
        }),
      watch,
      now: () => Date.now(),
    });
    if (sent.kind === "none") return noPoolAvailable(call);
    if (sent.kind === "unanswered") {
      if (sent.why === "unreachable") console.error(`no pool could be reached for ${callId} (tried ${route.pools.map((p) => p.id).join(", ")})`);
      return unanswered(call, sent.why);
    }
    const pool = sent.response;
    const load = parsePoolLoad(pool.headers.get(Header.poolLoad));
    if (load !== undefined) noteAnsweredLoad(sent.pool.id, load, Date.now());
    if (!pool.ok) return await relayPoolError(pool, call);
    if (allowed.stream) return relayStream(pool, call, watch);
    return await relayJson(pool, call, watch);
  } catch (error) {
    // A fault of our own after the call went out still settles it (nothing known used) and frees the slot.
    const finishedAt = Date.now();
    call.settle({
      callId,
      status: "error",
      promptTokens: 0,
      cachedTokens: 0,
      completionTokens: 0,
      usageSource: "none",
      serviceMs: 0,
      queueMs: finishedAt - call.sentAt,
      engine: "",
      finishedAt,
    });
    throw error;
  }
}
