import type { ForwardFields } from "../../protocol/forward.js";
import { newCallId } from "../../protocol/ids.js";
import { POOL_PATHS, type SigningKey, signedForwardHeaders } from "../../protocol/signing.js";

/*
 * Headers of edge-signed calls, made before a run: the pool rejects a replayed call
 * ID and a stale timestamp, so each request needs a fresh signature, but signing
 * (~0.1 ms of WebCrypto each) inside the load generator would slow the generator
 * for this target only. A run takes from the stock without awaiting anything.
 */

export interface SignedCallIdentity {
  tenant: string;
  /** Calls go round-robin to these programs (one per connection mirrors the edge run). */
  programs: string[];
  thread: string;
}

const SIGNED_ROUTE = { method: "POST", path: POOL_PATHS.chatCompletions } as const;

const RELEASED: Record<string, string> = Object.freeze({}) as Record<string, string>;

export class SignedRequestStock {
  readonly #stock: Record<string, string>[] = [];
  #next = 0;
  #signed = 0;
  /** Requests asked for after the stock ran out (sent unsigned, so the pool refuses them). */
  exhausted = 0;

  constructor(
    private readonly key: SigningKey,
    private readonly body: string,
    private readonly identity: SignedCallIdentity,
  ) {}

  /** Signs `count` more calls (POST /v1/chat/completions), each with a new call ID and the current time. */
  async fill(count: number): Promise<void> {
    const batchSize = 256;
    for (let done = 0; done < count; done += batchSize) {
      const batch = Array.from({ length: Math.min(batchSize, count - done) }, () => this.#signOne());
      this.#stock.push(...(await Promise.all(batch)));
    }
  }

  async #signOne(): Promise<Record<string, string>> {
    const { tenant, programs, thread } = this.identity;
    const fields: ForwardFields = {
      tenant,
      program: programs[this.#signed++ % programs.length] ?? "prog_bench",
      thread,
      call: newCallId(),
      serviceMs: 0,
      pathMs: 0,
      waitMs: 0,
      engine: "",
      weight: 1,
      generation: 0,
      ts: Date.now(),
    };
    return signedForwardHeaders(this.key, SIGNED_ROUTE, fields, this.body);
  }

  get remaining(): number {
    return this.#stock.length - this.#next;
  }

  /** The next unused signed headers; an empty object once the stock is exhausted. */
  take(): Record<string, string> {
    const headers = this.#stock[this.#next];
    if (headers === undefined) {
      this.exhausted++;
      return {};
    }
    // Release the reference: a long run must not keep every used header set alive.
    this.#stock[this.#next++] = RELEASED;
    return headers;
  }
}
