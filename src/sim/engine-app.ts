import type { HttpBindings } from "@hono/node-server";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import { type Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import type { z } from "zod";
import { requestedMaxTokens } from "../protocol/chat.js";
import { invalidRequest, openAIError, openAIErrorResponse } from "../protocol/errors.js";
import { KV_RETENTION_PATH, KV_RETENTION_TAG_FIELD, type KvRetentionAccepted, KvRetentionBatch } from "../protocol/kv-retention.js";
import { randomToken } from "../protocol/ids.js";
import { DONE_EVENT, dataEvent, formatEvent } from "../protocol/sse.js";
import { CountTokensRequest, MessagesRequest } from "../protocol/messages.js";
import { ResponsesRequest } from "../protocol/responses.js";
import { estimatePromptTokens, renderPrompt, tokenize } from "../protocol/tokens.js";
import { messagesAnswerFromChat, responsesAnswerFromChat } from "../protocol/translate/answers.js";
import { messagesToChatRequest } from "../protocol/translate/messages-chat.js";
import { responsesToChatRequest } from "../protocol/translate/responses-chat.js";
import type { GenerationObserver, RealTimeEngineDriver } from "./engine-driver.js";
import type { FaultInjector } from "./engine-faults.js";
import type { EngineMetrics } from "./engine-metrics.js";
import { type EngineRequest, EngineRequestError, type FinishedEvent } from "./engine-model.js";
import { chatFormat, chunkUsage, completionFormat, type ResponseFormat } from "./openai-responses.js";
import { outputText, outputTokenText } from "./output-text.js";
import { inDialect, vllmMessages, vllmResponses } from "./vllm-dialect.js";
import { COMPLETIONS_DEFAULT_MAX_TOKENS, SimChatRequest, SimCompletionRequest, SimTokenizeRequest } from "./request-schemas.js";
import { type KvHandoffs, kvHandoffRoutes } from "./kv-handoff.js";
import { KV_TRANSFER_PARAMS_FIELD, type KvTransferParams } from "../protocol/kv-transfer.js";

/*
 * vLLM's HTTP surface over a RealTimeEngineDriver: /v1/chat/completions,
 * /v1/completions, /v1/messages, /v1/responses, /v1/models, /health, /metrics. Runs under @hono/node-server;
 * `app.request()` works too, except that an injected "disconnect" then surfaces as
 * a body that fails instead of a closed socket.
 */

export interface SimEngineAppDeps {
  driver: RealTimeEngineDriver;
  metrics: EngineMetrics;
  faults: FaultInjector;
  modelName: string;
  /** Disaggregated serving (kv-handoff.ts); absent: kv_transfer_params are ignored. */
  handoffs?: KvHandoffs | undefined;
}

type SimEnv = { Bindings: Partial<HttpBindings> };

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
};

const encoder = new TextEncoder();

interface Generation {
  request: EngineRequest;
  stream: boolean;
  includeUsage: boolean;
  /** vLLM's `continuous_usage_stats`, honoured only with `include_usage` (as vLLM does). */
  continuousUsage: boolean;
  format: ResponseFormat;
  /** A remote-decode prefill (kv_transfer_params.do_remote_decode): its KV is held and named in the answer. */
  holdsKv: boolean;
  /** A remote-prefill decode (do_remote_prefill): the engine pulls its KV from the prefill engine these name. */
  pullsKvFrom: KvTransferParams | undefined;
}

/** What a request's kv_transfer_params ask of this engine. */
function kvRole(params: KvTransferParams | null | undefined, stream: boolean): { holdsKv: boolean; receives: KvTransferParams | undefined } {
  // vLLM returns kv_transfer_params only in a whole answer; a streamed prefill holds nothing here.
  return { holdsKv: params?.do_remote_decode === true && !stream, receives: params?.do_remote_prefill === true ? params : undefined };
}

/** What a request's stream_options ask for. */
function usageOptions(options: { include_usage?: boolean | null; continuous_usage_stats?: boolean | null } | null | undefined) {
  const includeUsage = options?.include_usage === true;
  return { includeUsage, continuousUsage: includeUsage && options?.continuous_usage_stats === true };
}

export function createSimEngineApp(deps: SimEngineAppDeps): Hono<SimEnv> {
  const { driver, metrics, faults, modelName, handoffs } = deps;
  const app = new Hono<SimEnv>();
  if (handoffs !== undefined) app.route("/", kvHandoffRoutes(handoffs));

  app.onError((err) => {
    if (err instanceof HTTPException) return err.getResponse();
    return openAIErrorResponse(500, err instanceof Error ? err.message : "internal error");
  });
  app.notFound((c) => openAIErrorResponse(404, `Not found: ${c.req.method} ${c.req.path}`));

  app.get("/health", (c) => c.body(null, 200));

  app.get("/v1/models", (c) =>
    c.json({
      object: "list",
      data: [
        {
          id: modelName,
          object: "model",
          created: Math.floor(Date.now() / 1000),
          owned_by: "vllm",
          root: modelName,
          parent: null,
          max_model_len: driver.model.profile.maxModelLen,
        },
      ],
    }),
  );

  app.get("/metrics", async (c) => {
    const { body, contentType } = await metrics.render();
    return c.body(body, 200, { "content-type": contentType });
  });

  /** A chat completion of `body` (the chat route's, and the translated Messages and Responses routes'). */
  async function chatGeneration(c: Context<SimEnv>, body: SimChatRequest): Promise<Response> {
    checkRequest(body.model, body.priority);
    const id = randomToken(24);
    const promptTokens = tokenize(renderPrompt(body));
    const kv = kvRole(body.kv_transfer_params, body.stream === true);
    const pullsKvFrom = handoffs === undefined ? undefined : kv.receives;
    return generate(c, {
      holdsKv: kv.holdsKv,
      pullsKvFrom,
      request: {
        id,
        promptTokens,
        ...(pullsKvFrom === undefined ? {} : { remoteKv: { reported: true } }),
        maxTokens: requestedMaxTokens(body),
        minTokens: body.min_tokens ?? undefined,
        ignoreEos: body.ignore_eos ?? false,
        priority: body.priority ?? 0,
        retentionTag: body[KV_RETENTION_TAG_FIELD] ?? undefined,
      },
      stream: body.stream === true,
      ...usageOptions(body.stream_options),
      format: chatFormat({ id: `chatcmpl-${id}`, created: nowSeconds(), model: modelName }),
    });
  }

  app.post("/v1/chat/completions", async (c) => {
    const fault = injectFault(c, faults);
    if (fault) return fault;
    return chatGeneration(c, parseBody(SimChatRequest, await readJson(c)));
  });

  // Anthropic's Messages API and OpenAI's Responses API, as vLLM serves them: generated as chat, answered in their shape.
  app.post("/v1/messages", async (c) => {
    const fault = injectFault(c, faults);
    if (fault) return fault;
    const request = parseBody(MessagesRequest, await readJson(c));
    // vLLM's Messages request has no priority field: a priority sent here is ignored, as there.
    const chat = parseBody(SimChatRequest, messagesToChatRequest(request));
    return inDialect(await messagesAnswerFromChat(await chatGeneration(c, chat), estimatePromptTokens(chat)), vllmMessages);
  });

  // Token counts as vLLM's API server makes them (no generation): the prompt its chat template renders, tokenized.
  app.post("/v1/messages/count_tokens", async (c) => {
    const request = parseBody(CountTokensRequest, await readJson(c));
    checkRequest(request.model, undefined);
    const chat = messagesToChatRequest({ ...request, max_tokens: 1 });
    return c.json({ input_tokens: tokenize(renderPrompt(chat)).length });
  });

  app.post("/tokenize", async (c) => {
    const request = parseBody(SimTokenizeRequest, await readJson(c));
    checkRequest(request.model, undefined);
    return c.json({ count: tokenize(renderPrompt(request)).length, max_model_len: driver.model.profile.maxModelLen });
  });

  app.post("/v1/responses", async (c) => {
    const fault = injectFault(c, faults);
    if (fault) return fault;
    const request = parseBody(ResponsesRequest, await readJson(c));
    if (request.previous_response_id) {
      throw openAIError(400, "This engine stores no responses: send the whole conversation as input.", { param: "previous_response_id" });
    }
    // vLLM's Responses request takes priority, as its chat request does.
    const chat = parseBody(SimChatRequest, { ...responsesToChatRequest(request), ...(request.priority === undefined ? {} : { priority: request.priority }) });
    return inDialect(await responsesAnswerFromChat(await chatGeneration(c, chat), request, `resp_${randomToken(24)}`), vllmResponses);
  });

  app.post("/v1/completions", async (c) => {
    const fault = injectFault(c, faults);
    if (fault) return fault;
    const body = parseBody(SimCompletionRequest, await readJson(c));
    checkRequest(body.model, body.priority);
    const id = randomToken(24);
    const prompt = typeof body.prompt === "string" ? body.prompt : body.prompt[0];
    const promptTokens = tokenize(prompt);
    const kv = kvRole(body.kv_transfer_params, body.stream === true);
    const pullsKvFrom = handoffs === undefined ? undefined : kv.receives;
    return generate(c, {
      holdsKv: kv.holdsKv,
      pullsKvFrom,
      request: {
        id,
        promptTokens,
        ...(pullsKvFrom === undefined ? {} : { remoteKv: { reported: true } }),
        maxTokens: body.max_tokens ?? COMPLETIONS_DEFAULT_MAX_TOKENS,
        minTokens: body.min_tokens ?? undefined,
        ignoreEos: body.ignore_eos ?? false,
        priority: body.priority ?? 0,
        retentionTag: body[KV_RETENTION_TAG_FIELD] ?? undefined,
      },
      stream: body.stream === true,
      ...usageOptions(body.stream_options),
      format: completionFormat({ id: `cmpl-${id}`, created: nowSeconds(), model: modelName }),
    });
  });

  // Agentix's KV retention hints (issue 13), in the engine's own clock: what a stock engine lacks.
  app.post(KV_RETENTION_PATH, async (c) => {
    const { hints } = parseBody(KvRetentionBatch, await readJson(c));
    const now = driver.nowMs();
    let applied = 0;
    for (const { tag, ...signal } of hints) if (driver.model.setRetention(tag, signal, now)) applied++;
    return c.json({ applied } satisfies KvRetentionAccepted);
  });

  /** vLLM rejects an unknown model and a priority without priority scheduling. */
  function checkRequest(model: string, priority: number | null | undefined): void {
    if (model !== modelName) {
      throw openAIError(404, `The model \`${model}\` does not exist.`, { code: "model_not_found", param: "model" });
    }
    if (priority && !driver.model.priorityScheduling) {
      throw openAIError(400, `Got priority ${priority} but Priority scheduling is not enabled.`, { param: "priority" });
    }
  }

  function submit(g: Generation, observer: GenerationObserver): number {
    const { request, pullsKvFrom } = g;
    // A remote-prefill decode: when the engine has room and starts the pull, read the KV at the transfer's end and say what arrived.
    const withPull: GenerationObserver =
      pullsKvFrom === undefined || handoffs === undefined
        ? observer
        : { ...observer, onKvPull: (pull) => void handoffs.pull(pullsKvFrom, driver.realMsUntil(pull.landsAtMs)).then((tokens) => driver.kvPullDone(pull.requestId, tokens)) };
    try {
      return driver.submit(request, withPull).seed;
    } catch (err) {
      if (err instanceof EngineRequestError) throw openAIError(400, err.message, { param: err.param });
      throw err;
    }
  }

  function generate(c: Context<SimEnv>, g: Generation): Response | Promise<Response> {
    const { id } = g.request;
    const signal = c.req.raw.signal;
    return g.stream ? streamed(g, signal) : whole(c, g, signal, id);
  }

  function streamed(g: Generation, signal: AbortSignal): Response {
    const { id } = g.request;
    let seed = 0;
    let open = true;
    let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
    // vLLM's continuous usage: the prompt and the tokens so far on every chunk.
    const promptTokens = g.request.promptTokens.length;
    const soFar = (completionTokens: number) => (g.continuousUsage ? chunkUsage(promptTokens, completionTokens) : undefined);
    const body = new ReadableStream<Uint8Array>({
      start(ctrl) {
        controller = ctrl;
        for (const chunk of g.format.openingChunks(soFar(0))) ctrl.enqueue(encoder.encode(dataEvent(chunk)));
      },
      // The client went away (node-server cancels the body): free the KV blocks.
      cancel() {
        open = false;
        driver.abort(id);
      },
    });
    const send = (text: string) => {
      if (open) controller?.enqueue(encoder.encode(text));
    };
    seed = submit(g, {
      onToken: (index) => send(dataEvent(g.format.tokenChunk(outputTokenText(seed, index), soFar(index + 1)))),
      onFinished: (event) => {
        send(dataEvent(g.format.finalChunk(event.finishReason, soFar(event.usage.completionTokens))));
        if (g.includeUsage) send(dataEvent(g.format.usageChunk(event.usage)));
        send(formatEvent(DONE_EVENT));
        if (open) controller?.close();
        open = false;
      },
      // Engine shutdown: the server has already dropped the socket, so the client sees
      // a broken stream; ending ours quietly (no [DONE]) just releases the reader.
      onClosed: () => {
        if (open) controller?.close();
        open = false;
      },
    });
    signal.addEventListener("abort", () => driver.abort(id), { once: true });
    return new Response(body, { headers: SSE_HEADERS });
  }

  async function whole(c: Context<SimEnv>, g: Generation, signal: AbortSignal, id: string): Promise<Response> {
    let seed = 0;
    let handoff: KvTransferParams | undefined;
    const finished = new Promise<FinishedEvent>((resolve, reject) => {
      seed = submit(g, {
        onToken: () => {},
        onFinished: (event) => {
          // Pinned now, before the engine's next step could reuse the blocks just freed.
          if (g.holdsKv) handoff = handoffs?.hold(g.request.promptTokens);
          resolve(event);
        },
        onClosed: () => reject(openAIError(503, "The engine shut down before the request finished.")),
      });
      signal.addEventListener(
        "abort",
        () => {
          driver.abort(id);
          // Nobody is listening any more; this only ends the handler.
          reject(new Error("Client closed the request."));
        },
        { once: true },
      );
    });
    const event = await finished;
    const body = g.format.completeBody(outputText(seed, event.usage.completionTokens), event.finishReason, event.usage) as Record<string, unknown>;
    return c.json(handoff === undefined ? body : { ...body, [KV_TRANSFER_PARAMS_FIELD]: handoff });
  }

  return app;
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

async function readJson(c: Context<SimEnv>): Promise<unknown> {
  try {
    return await c.req.json();
  } catch {
    throw openAIError(400, "Invalid request: the body is not valid JSON.", { code: "invalid_json" });
  }
}

function parseBody<T extends z.ZodType>(schema: T, raw: unknown): z.infer<T> {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw invalidRequest(parsed.error);
  return parsed.data;
}

/** Applies an injected fault to this request, or returns undefined to serve it normally. */
function injectFault(c: Context<SimEnv>, faults: FaultInjector): Response | undefined {
  const mode = faults.take();
  if (mode === undefined) return undefined;
  if (mode === "http-500") return openAIErrorResponse(500, "Injected engine failure.", { code: "injected_fault" });
  const socket = c.env?.incoming?.socket;
  if (socket) {
    socket.destroy();
    return RESPONSE_ALREADY_SENT;
  }
  // No socket (app.request in tests): a body that fails reads like a dropped connection.
  return new Response(
    new ReadableStream({
      start(controller) {
        controller.error(new Error("Injected disconnect."));
      },
    }),
  );
}
