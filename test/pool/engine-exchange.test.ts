import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { AttemptAbort } from "../../src/pool/attempt-abort.js";
import { type EngineAnswerListener, EngineExchange, EngineRequestAborted } from "../../src/pool/engine-exchange.js";

/*
 * One engine request through undici's dispatch() (engine-exchange.ts), against a real
 * HTTP server: the listener hears the answer and then exactly one of `end` or `error`,
 * whichever way the request ends (a whole answer, an abort before the request is
 * written or mid-body, a body that breaks off, a headers timeout, no connection).
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function server(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ origin: string; requests: () => number }> {
  let requests = 0;
  const srv: Server = createServer((req, res) => {
    requests += 1;
    handle(req, res);
  });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        srv.closeAllConnections();
        srv.close(() => resolve());
      }),
  );
  return { origin: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, requests: () => requests };
}

function agent(options: ConstructorParameters<typeof Agent>[0] = {}): Agent {
  const http = new Agent(options);
  cleanups.push(() => http.destroy());
  return http;
}

/** A listener that records what it heard, and settles once its exchange ends. */
function recorder() {
  const heard: string[] = [];
  const chunks: Buffer[] = [];
  let settle!: (how: { end: true } | { error: Error }) => void;
  const settled = new Promise<{ end: true } | { error: Error }>((resolve) => {
    settle = resolve;
  });
  const listener: EngineAnswerListener = {
    start(status, headers) {
      heard.push(`start ${status} ${String(headers["content-type"])}`);
    },
    data(chunk) {
      heard.push("data");
      chunks.push(chunk);
    },
    end() {
      heard.push("end");
      settle({ end: true });
    },
    error(error) {
      heard.push("error");
      settle({ error });
    },
  };
  return { listener, heard, settled, body: () => Buffer.concat(chunks).toString("utf8") };
}

/** Lets late callbacks (a second settle) show up before the assertions. */
const aWhile = () => new Promise((resolve) => setTimeout(resolve, 30));
const target = (origin: string) => ({ origin, path: "/v1/chat/completions", headers: { "content-type": "application/json" }, body: '{"a":1}' });

describe("EngineExchange", () => {
  it("hears a whole answer: start, its chunks, then end once", async () => {
    const engine = await server((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"part":');
        setTimeout(() => res.end('"two"}'), 5);
      });
    });
    const { listener, heard, settled, body } = recorder();
    EngineExchange.send(agent(), target(engine.origin), new AttemptAbort(), listener);
    expect(await settled).toEqual({ end: true });
    await aWhile();
    expect(heard[0]).toBe("start 200 application/json");
    expect(heard.filter((h) => h === "end" || h === "error")).toEqual(["end"]);
    expect(body()).toBe('{"part":"two"}');
  });

  it("an abort before undici writes the request: error once, and the engine never sees it", async () => {
    const engine = await server((_req, res) => res.end("{}"));
    const abort = new AttemptAbort();
    const { listener, heard, settled } = recorder();
    EngineExchange.send(agent(), target(engine.origin), abort, listener);
    // Synchronously after the send: undici writes the request a turn later.
    abort.abort(new Error("client disconnected"));
    const outcome = await settled;
    await aWhile();
    expect(outcome).toMatchObject({ error: expect.any(EngineRequestAborted) });
    expect(heard).toEqual(["error"]);
    expect(engine.requests()).toBe(0);
  });

  it("an attempt already aborted is not sent", async () => {
    const engine = await server((_req, res) => res.end("{}"));
    const abort = new AttemptAbort();
    abort.abort(new Error("pool shutting down"));
    const { listener, heard, settled } = recorder();
    EngineExchange.send(agent(), target(engine.origin), abort, listener);
    expect(await settled).toMatchObject({ error: expect.any(EngineRequestAborted) });
    await aWhile();
    expect(heard).toEqual(["error"]);
    expect(engine.requests()).toBe(0);
  });

  it("an abort mid-body: error once, no end, the reason kept", async () => {
    const engine = await server((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
    });
    const abort = new AttemptAbort();
    const { listener, heard, settled } = recorder();
    const started = new Promise<void>((resolve) => {
      listener.data = (chunk) => {
        heard.push("data");
        void chunk;
        resolve();
      };
    });
    EngineExchange.send(agent(), target(engine.origin), abort, listener);
    await started;
    const reason = new Error("client disconnected");
    abort.abort(reason);
    const outcome = await settled;
    await aWhile();
    expect(outcome).toMatchObject({ error: expect.any(EngineRequestAborted) });
    expect(outcome).toMatchObject({ error: { reason } });
    expect(heard.filter((h) => h === "end" || h === "error")).toEqual(["error"]);
  });

  it("a body that breaks off: error once, not end", async () => {
    const engine = await server((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
      res.write('{"cut":');
      setTimeout(() => res.socket?.destroy(), 5);
    });
    const { listener, heard, settled } = recorder();
    EngineExchange.send(agent(), target(engine.origin), new AttemptAbort(), listener);
    const outcome = await settled;
    await aWhile();
    expect("error" in outcome).toBe(true);
    expect(heard.filter((h) => h === "end" || h === "error")).toEqual(["error"]);
  });

  it("an engine that never answers: the dispatcher's headers timeout, error once", async () => {
    const engine = await server((req) => req.resume());
    const { listener, heard, settled } = recorder();
    EngineExchange.send(agent({ headersTimeout: 50 }), target(engine.origin), new AttemptAbort(), listener);
    const outcome = await settled;
    await aWhile();
    expect(outcome).toMatchObject({ error: { code: "UND_ERR_HEADERS_TIMEOUT" } });
    expect(heard).toEqual(["error"]);
  });

  it("no engine listening: error once with the connection's code", async () => {
    const engine = await server(() => undefined);
    const origin = engine.origin;
    await cleanups.pop()?.();
    const { listener, heard, settled } = recorder();
    EngineExchange.send(agent(), target(origin), new AttemptAbort(), listener);
    const outcome = await settled;
    expect(outcome).toMatchObject({ error: { code: "ECONNREFUSED" } });
    expect(heard).toEqual(["error"]);
  });

  it("holds the body while paused and delivers all of it after resume", async () => {
    const engine = await server((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("x".repeat(256 * 1024));
    });
    const { listener, settled, body } = recorder();
    const exchange = EngineExchange.send(agent(), target(engine.origin), new AttemptAbort(), listener);
    exchange.pause();
    await aWhile();
    expect(exchange.ended).toBe(false);
    exchange.resume();
    expect(await settled).toEqual({ end: true });
    expect(body().length).toBe(256 * 1024);
  });
});
