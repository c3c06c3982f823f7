import http from "node:http";
import { describe, expect, it } from "vitest";
import { Header } from "../../src/protocol/headers.js";
import { eventObject, isDoneEvent } from "../../src/protocol/sse.js";
import { parseStatsEvent } from "../../src/protocol/stats.js";
import { DEFAULT_SIM_MODEL } from "../../src/sim/engine-server.js";
import { DirectAnswer, headerList } from "../../src/pool/direct-answer.js";
import { chatBody, signedCall, useSimEnginePool, waitFor } from "./helpers.js";

/*
 * An engine's answer is written straight to Node's response when the pool serves a
 * socket (direct-answer.ts), and sent as the Response it is otherwise (Hono's
 * app.request(), a translated answer). Both must carry the same status, headers and
 * body (a stream: the same events, the stats comment before [DONE]); and a client that leaves a long stream unread for a while (megabytes,
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

describe("an engine's answer, written to Node's response or read as a Response", () => {

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

  it("writes a whole answer with the same status, headers and body as the Response it stands for", async () => {
    const { pool } = stack;
    const body = chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: 12, ignore_eos: true });
    const overSocket = await signedCall({ body });
    const res = await fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: overSocket.headers, body: overSocket.body });
    const inProcess = await signedCall({ body });
    const web = await pool.app.request("/v1/chat/completions", { method: "POST", headers: inProcess.headers, body: inProcess.body });
    const texts = [await res.text(), await web.text()];
    for (const answer of [res, web]) {
      expect(answer.status).toBe(200);
      expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
      expect(answer.headers.get(Header.engine)).toBe("sim-1");
      expect(answer.headers.get(Header.serviceMs)).toMatch(/^\d+$/);
      expect(answer.headers.get(Header.poolLoad)).not.toBeNull();
    }
    expect(Number(res.headers.get("content-length"))).toBe(Buffer.byteLength(texts[0] ?? ""));
    const content = (text: string | undefined) => (JSON.parse(text ?? "") as { choices: { message: { content: string } }[] }).choices[0]?.message.content;
    expect(content(texts[0])).toBe(content(texts[1]));
  });

  it("sends each of an answer's headers once, its own then the pool's, a whole answer's length last", async () => {
    const { pool } = stack;
    /** The raw header names of an answer over the socket, without those Node adds to every answer. */
    const headerNames = async (body: unknown): Promise<string[]> => {
      const call = await signedCall({ body });
      const url = new URL(`${pool.url}/v1/chat/completions`);
      return new Promise((resolve, reject) => {
        const request = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: call.headers }, (answer) => {
          answer.resume();
          answer.on("end", () => {
            const names = answer.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
            resolve(names.filter((name) => !["date", "connection", "keep-alive", "transfer-encoding"].includes(name)));
          });
        });
        request.on("error", reject);
        request.end(call.body);
      });
    };
    const whole = await headerNames(chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: 4 }));
    expect(whole).toEqual([Header.engine, Header.queueMs, Header.serviceMs, "content-type", Header.poolLoad, "content-length"]);
    const stream = await headerNames(streamingBody(4));
    expect(stream).toEqual(["content-type", "cache-control", Header.engine, Header.queueMs, Header.poolLoad]);
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

describe("a direct answer", () => {
  const fakeOutgoing = () => {
    const written: string[] = [];
    return { written, outgoing: { end: (text: string) => written.push(text) } as unknown as http.ServerResponse };
  };

  it("lists headers for Node's writeHead as name, value pairs: the answer's own, then the added ones", () => {
    expect(headerList({ "content-type": "application/json", "x-b": "2" }, { "x-load": "0.5" })).toEqual(["content-type", "application/json", "x-b", "2", "x-load", "0.5"]);
    expect(headerList({}, {})).toEqual([]);
  });

  it("builds its Response only when asked, once, and runs what waited for it once", () => {
    let built = 0;
    let after = 0;
    const answer = new DirectAnswer(
      () => {
        built += 1;
        return new Response("whole");
      },
      () => undefined,
    );
    answer.afterHandingOver(() => (after += 1));
    expect(built).toBe(0);
    const first = answer.response();
    expect(answer.response()).toBe(first);
    expect(built).toBe(1);
    expect(after).toBe(1);
  });

  it("is written once, then runs what waited for it; it cannot be written or read again", () => {
    let after = 0;
    const { written, outgoing } = fakeOutgoing();
    const answer = new DirectAnswer(
      () => new Response("whole"),
      (out) => out.end("whole"),
    );
    answer.afterHandingOver(() => (after += 1));
    answer.write(outgoing, {});
    expect(written).toEqual(["whole"]);
    expect(after).toBe(1);
    expect(() => answer.write(outgoing, {})).toThrow(/already/);
    expect(() => answer.response()).toThrow(/already/);
    expect(after).toBe(1);
  });

  it("is not written straight once its Response was handed out", () => {
    const { written, outgoing } = fakeOutgoing();
    const answer = new DirectAnswer(
      () => new Response("whole"),
      (out) => out.end("whole"),
    );
    answer.response();
    expect(() => answer.write(outgoing, {})).toThrow(/already/);
    expect(written).toEqual([]);
  });
});
