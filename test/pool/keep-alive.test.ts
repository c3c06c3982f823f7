import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { POOL_KEEP_ALIVE_TIMEOUT_MS, type PoolHandle, startPool } from "../../src/pool/server.js";
import { type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { testConfig } from "./helpers.js";

/*
 * The edge's fetch() (workerd) pools idle connections to the pool for 5 s and, under
 * load, reuses them later than that; it ignores the Keep-Alive hint. So the pool must
 * not be the side that closes an idle connection a client may still reuse (Node's
 * default closes it after 5 s, plus a 1 s grace in Node 20).
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One raw HTTP/1.1 connection: send a request, read one whole response (no body framing needed for /health). */
class RawConnection {
  #buffer = "";
  #closed = false;
  #waiters: (() => void)[] = [];

  private constructor(private readonly socket: Socket) {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      this.#buffer += chunk;
      this.#wake();
    });
    socket.on("close", () => {
      this.#closed = true;
      this.#wake();
    });
    socket.on("error", () => undefined);
  }

  static open(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => resolve(new RawConnection(socket)));
      socket.once("error", reject);
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  #wake(): void {
    for (const waiter of this.#waiters.splice(0)) waiter();
  }

  /** GET /health on this connection; resolves with the response head and body, or "closed". */
  async get(path: string): Promise<string> {
    this.#buffer = "";
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: pool\r\nConnection: keep-alive\r\n\r\n`);
    for (;;) {
      const headEnd = this.#buffer.indexOf("\r\n\r\n");
      if (headEnd >= 0) {
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(this.#buffer)?.[1] ?? "0");
        if (this.#buffer.length >= headEnd + 4 + length) return this.#buffer;
      }
      if (this.#closed) return "closed";
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  end(): void {
    this.socket.destroy();
  }
}

async function pool(): Promise<{ pool: PoolHandle; engine: FakeEngine }> {
  const engine = await startFakeEngine();
  cleanups.push(() => engine.close());
  const handle = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url }] }));
  cleanups.push(() => handle.close());
  return { pool: handle, engine };
}

describe("pool keep-alive towards the edge", () => {
  it("outlasts the idle reuse of workerd and of Cloudflare's edge (900 s)", () => {
    expect(POOL_KEEP_ALIVE_TIMEOUT_MS).toBeGreaterThan(900_000);
  });

  it("keeps an idle connection open past Node's default 5 s (+1 s grace) and serves the next request on it", async () => {
    const { pool: p } = await pool();
    const connection = await RawConnection.open(p.port);
    cleanups.push(async () => connection.end());

    const first = await connection.get("/health");
    expect(first).toMatch(/^HTTP\/1\.1 200 /);
    // The server advertises its timeout (seconds); clients that honour it (undici) stay below it.
    expect(first).toMatch(new RegExp(`\\r\\nkeep-alive: timeout=${POOL_KEEP_ALIVE_TIMEOUT_MS / 1000}\\r\\n`, "i"));

    // Idle longer than Node's default would allow (5 s + its 1 s grace).
    await new Promise((resolve) => setTimeout(resolve, 6_500));
    expect(connection.closed).toBe(false);
    const second = await connection.get("/health");
    expect(second).toMatch(/^HTTP\/1\.1 200 /);
  }, 15_000);
});
