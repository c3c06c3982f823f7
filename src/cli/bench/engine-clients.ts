import { spawn } from "node:child_process";
import http from "node:http";
import { fileURLToPath } from "node:url";
import { Agent, Client, type Dispatcher } from "undici";

/*
 * `npm run bench:engine-clients [-- CALLS ROUNDS]`: the pool's engine hop alone. One
 * keep-alive connection to a tiny node:http server in its own process (it reads the
 * body and answers ~300 bytes of JSON), small POSTs one after another, through each
 * way a Node process can send them: undici's request() (Agent and Client, with and
 * without an AbortController, with an EventEmitter-like signal), undici's dispatch()
 * with a handler (what the pool's relay uses: src/pool/engine-exchange.ts), and
 * node:http with a keep-alive Agent. Blocks alternate in order, rounds report the
 * median p50 round trip and this process's CPU per request.
 */

const PAYLOAD = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi ".repeat(60) }], max_tokens: 16, stream: false });
const HEADERS = { "content-type": "application/json", accept: "application/json", "x-request-id": "bench" };
const PATH = "/v1/chat/completions";

/** The engine stand-in, when this file runs as the child. */
function serve(): void {
  const answer = Buffer.from(
    JSON.stringify({
      id: "chatcmpl-x",
      object: "chat.completion",
      created: 1,
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "hello ".repeat(16) }, finish_reason: "length" }],
      usage: { prompt_tokens: 20, completion_tokens: 16, total_tokens: 36 },
    }),
  );
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json", "content-length": String(answer.length) });
      res.end(answer);
    });
  });
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    process.stdout.write(`${typeof address === "object" && address ? address.port : 0}\n`);
  });
}

/** An EventEmitter-shaped signal (undici takes one): one listener, no EventTarget. */
class OneListenerSignal {
  aborted = false;
  reason: unknown = undefined;
  #listener: (() => void) | undefined;
  on(_event: string, listener: () => void): this {
    this.#listener = listener;
    return this;
  }
  once(event: string, listener: () => void): this {
    return this.on(event, listener);
  }
  removeListener(_event: string, listener: () => void): this {
    if (this.#listener === listener) this.#listener = undefined;
    return this;
  }
}

function dispatched(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    dispatcher.dispatch(options, {
      // Its presence makes the handler one of undici 7's controller API (without it undici takes it for the old one).
      onRequestStart() {},
      onResponseData(_controller, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        resolve(Buffer.concat(chunks));
      },
      onResponseError(_controller, error) {
        reject(error);
      },
    });
  });
}

async function main(): Promise<void> {
  const [callsRaw, roundsRaw] = process.argv.slice(2);
  const calls = Number(callsRaw ?? 2000);
  const rounds = Number(roundsRaw ?? 6);
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--serve"], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve) => child.stdout.once("data", (data: Buffer) => resolve(Number(String(data).trim()))));
  const origin = `http://127.0.0.1:${port}`;
  const agent = new Agent({ keepAliveTimeout: 10_000 });
  const client = new Client(origin, { keepAliveTimeout: 10_000 });
  const nodeAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const options = { origin, path: PATH, method: "POST" as const, headers: HEADERS, body: PAYLOAD };

  const ways: Record<string, () => Promise<unknown>> = {
    "undici Agent request()": async () => (await agent.request(options)).body.bytes(),
    "undici Agent request() + AbortController": async () => (await agent.request({ ...options, signal: new AbortController().signal })).body.bytes(),
    "undici Agent request() + one-listener signal": async () => (await agent.request({ ...options, signal: new OneListenerSignal() })).body.bytes(),
    "undici Client request()": async () => (await client.request({ path: PATH, method: "POST", headers: HEADERS, body: PAYLOAD })).body.bytes(),
    "undici Agent dispatch()": () => dispatched(agent, options),
    "undici Client dispatch()": () => dispatched(client, { path: PATH, method: "POST", headers: HEADERS, body: PAYLOAD }),
    "node:http keep-alive Agent": () =>
      new Promise((resolve, reject) => {
        const req = http.request(
          { host: "127.0.0.1", port, path: PATH, method: "POST", headers: { ...HEADERS, "content-length": Buffer.byteLength(PAYLOAD) }, agent: nodeAgent },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (chunk: Buffer) => chunks.push(chunk));
            res.on("end", () => resolve(Buffer.concat(chunks)));
            res.on("error", reject);
          },
        );
        req.on("error", reject);
        req.end(PAYLOAD);
      }),
  };
  try {
    console.log(await measure(ways, calls, rounds));
  } finally {
    child.kill();
    await Promise.all([agent.close(), client.close()]);
    nodeAgent.destroy();
  }
}

async function measure(ways: Record<string, () => Promise<unknown>>, calls: number, rounds: number): Promise<string> {
  const names = Object.keys(ways);
  const p50s = new Map<string, number[]>(names.map((name) => [name, []]));
  const cpus = new Map<string, number[]>(names.map((name) => [name, []]));
  for (const name of names) for (let i = 0; i < 500; i++) await ways[name]?.();
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 === 0 ? names : [...names].reverse()) {
      const way = ways[name];
      if (way === undefined) continue;
      const latencies = new Float64Array(calls);
      const cpuBefore = process.cpuUsage();
      for (let i = 0; i < calls; i++) {
        const start = process.hrtime.bigint();
        await way();
        latencies[i] = Number(process.hrtime.bigint() - start) / 1_000;
      }
      const cpu = process.cpuUsage(cpuBefore);
      latencies.sort();
      p50s.get(name)?.push(latencies[calls >> 1] ?? Number.NaN);
      cpus.get(name)?.push((cpu.user + cpu.system) / calls);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? Number.NaN;
  const lines = [`one connection, ${calls} POSTs per block, ${rounds} rounds: median p50 round trip (each round's), client CPU per request`];
  for (const name of names) {
    const each = p50s.get(name) ?? [];
    lines.push(`${name.padEnd(46)} ${median(each).toFixed(1).padStart(6)} µs  (${each.map((v) => v.toFixed(0)).join(" ")})  ${median(cpus.get(name) ?? []).toFixed(1).padStart(6)} µs CPU`);
  }
  return lines.join("\n");
}

if (process.argv.includes("--serve")) serve();
else
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
