import http from "node:http";
import { describe, expect, it } from "vitest";
import { Header } from "../../src/protocol/headers.js";
import { eventObject, isDoneEvent } from "../../src/protocol/sse.js";
import { parseStatsEvent } from "../../src/protocol/stats.js";
import { DEFAULT_SIM_MODEL } from "../../src/sim/engine-server.js";
import { chatBody, signedCall, useSimEnginePool, waitFor } from "./helpers.js";

/*
 * A relayed stream is written straight to Node's response when the pool serves a
 * socket, and read through the Response's web stream otherwise (Hono's app.request(),
 * a translated answer). Both must carry the same headers and events, the stats comment
 * before [DONE]; and a client that leaves a long stream unread for a while (megabytes,
 * more than the sockets hold) must still get every event.
 */

const stack = useSimEnginePool({ maxInFlight: 4, timeScale: Infinity });

/** Events of an SSE body: the content of each text chunk, stats comments and [DONE], in order. */
function shape(text: string): string[] {
  return text
    .split("\n\n")
    .filter((event) => event.trim() !== "")
    .map((event) => {
      if (isDoneEvent(event)) return "[DONE]";
      if (parseStatsEvent(event) !== undefined) return "stats";
      const chunk = eventObject(event) as { choices?: { delta?: { content?: string } }[]; usage?: unknown } | undefined;
      const content = chunk?.choices?.[0]?.delta?.content;
      return typeof content === "string" ? `text:${content}` : chunk?.usage ? "usage" : "other";
    });
}

const streamingBody = (maxTokens: number) =>
  chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: maxTokens, ignore_eos: true, stream: true, stream_options: { include_usage: true } });

describe("a relayed stream, written to Node's response or read as a web stream", () => {

  it("carries the same headers and events either way", async () => {
    const { pool } = stack;
    const overSocket = await signedCall({ body: streamingBody(12) });
    const res = await fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: overSocket.headers, body: overSocket.body });
    const socketText = await res.text();

    const inProcess = await signedCall({ body: streamingBody(12) });
    const web = await pool.app.request("/v1/chat/completions", { method: "POST", headers: inProcess.headers, body: inProcess.body });
    const webText = await web.text();

    for (const answer of [res, web]) {
      expect(answer.status).toBe(200);
      expect(answer.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
      expect(answer.headers.get(Header.engine)).toBe("sim-1");
      expect(answer.headers.get(Header.queueMs)).toMatch(/^\d+$/);
      expect(answer.headers.get(Header.poolLoad)).not.toBeNull();
    }
    const events = shape(socketText);
    expect(events.filter((e) => e.startsWith("text:") && e !== "text:")).toHaveLength(12);
    expect(events.slice(-2)).toEqual(["stats", "[DONE]"]);
    expect(shape(webText)).toEqual(events);
  });

  it("delivers every event of a long stream to a client that did not read for a while", async () => {
    const { pool, engine } = stack;
    const tokens = 20_000;
    const call = await signedCall({ body: streamingBody(tokens) });
    const url = new URL(`${pool.url}/v1/chat/completions`);
    const text = await new Promise<string>((resolve, reject) => {
      const request = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: call.headers }, (res) => {
        // Not read for a while: the sockets fill and the pool's writes queue behind them.
        res.pause();
        setTimeout(() => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (body += chunk));
          res.on("end", () => resolve(body));
          res.resume();
        }, 300);
      });
      request.on("error", reject);
      request.end(call.body);
    });
    const events = shape(text);
    expect(events.filter((e) => e.startsWith("text:") && e !== "text:")).toHaveLength(tokens);
    expect(events.slice(-2)).toEqual(["stats", "[DONE]"]);
    await waitFor(() => engine.model.stats().running === 0, "the engine done with the call");
  });
});
