import net from "node:net";

/*
 * A TCP pass-through between a proxy and the engine that notes when a call's bytes
 * cross it (process.hrtime: CLOCK_MONOTONIC, the clock of every process on the
 * machine and of V8's CPU profiles): the first byte of a call's request from the proxy
 * ("the engine request's first byte on the wire") and the last byte of the engine's
 * answer to it. Bytes are forwarded as they come, unchanged. Only requests whose first
 * line is `POST <callPath>` are calls: the pool's metrics scrapes of the engine cross
 * the same tap, on the same keep-alive sockets.
 */

export interface HopTap {
  /** `http://127.0.0.1:port`: the engine URL to give the proxy. */
  url: string;
  /** Forgets the last call's times; the next call request's first byte is noted afresh. */
  reset(): void;
  /** ns (process.hrtime) of the current call request's first byte; undefined before it. */
  readonly requestFirstByteNs: bigint | undefined;
  /** ns of the last byte of the engine's answer to a call, so far. */
  readonly answerLastByteNs: bigint | undefined;
  close(): Promise<void>;
}

export async function startHopTap(engineUrl: string, callPath: string): Promise<HopTap> {
  const engine = new URL(engineUrl);
  const callLine = `POST ${callPath}`;
  let requestFirstByteNs: bigint | undefined;
  let answerLastByteNs: bigint | undefined;
  const sockets = new Set<net.Socket>();

  const server = net.createServer((proxySide) => {
    const engineSide = net.connect({ host: engine.hostname, port: Number(engine.port) });
    proxySide.setNoDelay(true);
    engineSide.setNoDelay(true);
    sockets.add(proxySide).add(engineSide);
    /** Whether the request this connection carries now is a call (its answer's bytes are noted). */
    let carryingCall = false;
    proxySide.on("data", (chunk: Buffer) => {
      const at = process.hrtime.bigint();
      // A new request starts with its method; a body's later chunk keeps the state.
      if (chunk.subarray(0, 4).toString("latin1") === "POST" || chunk.subarray(0, 4).toString("latin1") === "GET ") {
        carryingCall = chunk.subarray(0, callLine.length).toString("latin1") === callLine;
        if (carryingCall && requestFirstByteNs === undefined) requestFirstByteNs = at;
      }
      engineSide.write(chunk);
    });
    engineSide.on("data", (chunk: Buffer) => {
      if (carryingCall) answerLastByteNs = process.hrtime.bigint();
      proxySide.write(chunk);
    });
    const closeBoth = () => {
      proxySide.destroy();
      engineSide.destroy();
      sockets.delete(proxySide);
      sockets.delete(engineSide);
    };
    proxySide.on("close", closeBoth).on("error", closeBoth);
    engineSide.on("close", closeBoth).on("error", closeBoth);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("hop tap has no TCP address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    reset() {
      requestFirstByteNs = undefined;
      answerLastByteNs = undefined;
    },
    get requestFirstByteNs() {
      return requestFirstByteNs;
    },
    get answerLastByteNs() {
      return answerLastByteNs;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
