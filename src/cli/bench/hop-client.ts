import net from "node:net";
import { HttpResponseReader } from "./hop-response-reader.js";

/*
 * One keep-alive connection that sends prepared request bytes and notes, on the
 * monotonic clock (process.hrtime), the moment before the request's write and the
 * moment the chunk that completes its response arrives: no HTTP client library
 * between the socket and the clock.
 */

export interface HopExchange {
  /** ns before the request's bytes were written. */
  sentNs: bigint;
  /** ns at the arrival of the chunk that completed the response. */
  answeredNs: bigint;
  status: number;
  body: string;
}

export class HopConnection {
  readonly #socket: net.Socket;
  readonly #reader = new HttpResponseReader();
  #waiting: { sentNs: bigint; resolve: (exchange: HopExchange) => void; reject: (error: Error) => void } | undefined;

  private constructor(socket: net.Socket) {
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      const at = process.hrtime.bigint();
      const waiting = this.#waiting;
      if (waiting === undefined) return;
      let progress;
      try {
        progress = this.#reader.push(chunk);
      } catch (error) {
        this.#waiting = undefined;
        waiting.reject(error instanceof Error ? error : new Error(String(error)));
        return;
      }
      if (!progress.done) return;
      this.#waiting = undefined;
      waiting.resolve({ sentNs: waiting.sentNs, answeredNs: at, status: progress.status, body: progress.body });
    });
    const fail = (error?: Error) => {
      const waiting = this.#waiting;
      this.#waiting = undefined;
      waiting?.reject(error ?? new Error("connection closed before the response was complete"));
    };
    socket.on("error", fail);
    socket.on("close", () => fail());
  }

  static open(url: string): Promise<HopConnection> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: hostname, port: Number(port) }, () => {
        socket.off("error", reject);
        resolve(new HopConnection(socket));
      });
      socket.once("error", reject);
    });
  }

  /** Sends one request (whole HTTP/1.1 bytes) and resolves with its response once complete. */
  exchange(request: Buffer): Promise<HopExchange> {
    if (this.#waiting !== undefined) return Promise.reject(new Error("one request at a time"));
    return new Promise((resolve, reject) => {
      const sentNs = process.hrtime.bigint();
      this.#waiting = { sentNs, resolve, reject };
      this.#socket.write(request);
    });
  }

  close(): void {
    this.#socket.destroy();
  }
}

/** An HTTP/1.1 POST of `body` to `url`'s path, with these headers. */
export function postBytes(url: string, headers: Readonly<Record<string, string>>, body: string): Buffer {
  const { host, pathname, search } = new URL(url);
  const payload = Buffer.from(body, "utf8");
  const lines = [`POST ${pathname}${search} HTTP/1.1`, `host: ${host}`, "connection: keep-alive", `content-length: ${payload.byteLength}`];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return Buffer.concat([Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "latin1"), payload]);
}
