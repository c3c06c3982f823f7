import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { openAIErrorBody } from "../../protocol/errors.js";
import { newCallId } from "../../protocol/ids.js";
import { DONE_EVENT, dataEvent, formatEvent } from "../../protocol/sse.js";
import { countTokens } from "../../protocol/tokens.js";
import { chatFormat } from "../../sim/openai-responses.js";
import { TickScheduler } from "./relay-tick-scheduler.js";

/*
 * The engine of the relay benchmark: an OpenAI-compatible server (what the pool's
 * `openai` engine kind needs: GET /v1/models and POST /v1/chat/completions) whose
 * streams emit `max_tokens` content chunks, one every `intervalMs`, like a real
 * engine's inter-token latency, with no model behind them. Chunks are in vLLM's
 * shapes (src/sim/openai-responses.ts: role chunk, token chunks, finish chunk, the
 * include_usage chunk with no choices, then [DONE]; checked against vLLM's
 * vllm/entrypoints/openai/serving_chat.py, chat_completion_stream_generator). One
 * difference: vLLM puts the last token's text in the chunk that carries finish_reason,
 * this source sends an empty finish chunk after it, as the simulated engine does (one
 * more event per stream, 1 in 200 at the default length). The first token goes out at
 * once (no prefill), so a client's time to first token is the relay's own.
 *
 * It is built to stay off the critical path: one timer serves every stream due in the
 * same millisecond (TickScheduler), and each stream's token event is serialised once.
 */

export const RELAY_SOURCE_MODEL = "relay-source";

/** Most tokens one stream may ask for (a 50 tokens/s stream of this lasts ~30 min). */
const MAX_STREAM_TOKENS = 100_000;

/** Longer than any client's idle reuse, so the client is always the side that closes (as the pool does: server.ts). */
const KEEP_ALIVE_TIMEOUT_MS = 120_000;

/** The kernel caps it at net.core.somaxconn; Node's default (511) drops SYNs when 2,000 streams connect at once. */
const LISTEN_BACKLOG = 4_096;

const TOKEN_TEXT = "tok ";

const StreamRequest = z.looseObject({
  model: z.string().min(1),
  messages: z.array(z.unknown()).min(1),
  stream: z.literal(true, { error: "this source only streams: stream must be true" }),
  max_tokens: z.int().min(1).max(MAX_STREAM_TOKENS),
});

export interface TokenSourceOptions {
  /** Time between two tokens of a stream (a real engine's inter-token latency). */
  intervalMs: number;
  host?: string;
  port?: number;
}

export interface TokenSourceHandle {
  url: string;
  model: string;
  /** Streams open right now. */
  openStreams(): number;
  close(): Promise<void>;
}

interface PacedStream {
  res: ServerResponse;
  tokenEvent: string;
  tailEvents: string;
  tokens: number;
  sent: number;
  dueMs: number;
  closed: boolean;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (text += chunk));
    req.on("end", () => resolve(text));
    req.on("error", reject);
  });
}

export async function startTokenSource(options: TokenSourceOptions): Promise<TokenSourceHandle> {
  const { intervalMs } = options;
  if (!(intervalMs > 0 && Number.isFinite(intervalMs))) throw new RangeError(`intervalMs must be a positive number, got ${intervalMs}`);
  let open = 0;

  const scheduler = new TickScheduler<PacedStream>((stream) => {
    if (stream.closed) return;
    stream.sent++;
    if (stream.sent < stream.tokens) {
      stream.res.write(stream.tokenEvent);
      stream.dueMs += intervalMs;
      scheduler.schedule(stream, stream.dueMs);
      return;
    }
    stream.closed = true;
    stream.res.end(stream.tokenEvent + stream.tailEvents);
  });

  async function chat(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let parsed: z.infer<typeof StreamRequest>;
    try {
      const result = StreamRequest.safeParse(JSON.parse(await readBody(req)));
      if (!result.success) {
        const issue = result.error.issues[0];
        return sendJson(res, 400, openAIErrorBody(400, `Invalid request: ${issue?.path.join(".") ?? ""}: ${issue?.message ?? "malformed"}`));
      }
      parsed = result.data;
    } catch {
      return sendJson(res, 400, openAIErrorBody(400, "Invalid request: the body is not JSON"));
    }
    const format = chatFormat({ id: `chatcmpl-${newCallId()}`, created: Math.floor(Date.now() / 1000), model: parsed.model });
    const tokens = parsed.max_tokens;
    const promptTokens = countTokens(JSON.stringify(parsed.messages));
    const stream: PacedStream = {
      res,
      tokenEvent: dataEvent(format.tokenChunk(TOKEN_TEXT)),
      tailEvents:
        dataEvent(format.finalChunk("length")) +
        dataEvent(format.usageChunk({ promptTokens, cachedTokens: 0, completionTokens: tokens })) +
        formatEvent(DONE_EVENT),
      tokens,
      sent: 0,
      dueMs: performance.now(),
      closed: false,
    };
    open++;
    res.on("close", () => {
      stream.closed = true;
      open--;
    });
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    res.write(format.openingChunks().map(dataEvent).join(""));
    scheduler.schedule(stream, stream.dueMs);
  }

  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && (path === "/v1/models" || path === "/health")) {
      return sendJson(res, 200, { object: "list", data: [{ id: RELAY_SOURCE_MODEL, object: "model", created: 0, owned_by: "agentix-bench" }] });
    }
    if (req.method === "POST" && path === "/v1/chat/completions") {
      chat(req, res).catch(() => res.destroy());
      return;
    }
    sendJson(res, 404, openAIErrorBody(404, `no route ${req.method} ${path}`));
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;

  const address = await new Promise<AddressInfo>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: options.host ?? "127.0.0.1", port: options.port ?? 0, backlog: LISTEN_BACKLOG }, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });

  return {
    url: `http://${address.address}:${address.port}`,
    model: RELAY_SOURCE_MODEL,
    openStreams: () => open,
    close: () =>
      new Promise<void>((resolve) => {
        scheduler.stop();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
