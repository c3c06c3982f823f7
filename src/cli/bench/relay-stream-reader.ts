import { StringDecoder } from "node:string_decoder";

/*
 * Reads one streamed chat completion at the client as its bytes arrive: cuts it into
 * SSE events, reports the arrival of every content chunk (a token) and, at the end,
 * whether the stream was complete: exactly the expected content chunks, a usage chunk
 * saying so, `data: [DONE]` last, no error event. A stream that breaks off, comes up
 * short or carries an error is a failure, never a figure. Comments (the pool's
 * `: agentix {…}` stats line) are skipped.
 */

export type StreamVerdict = { ok: true } | { ok: false; reason: string };

interface ChunkShape {
  object?: unknown;
  error?: unknown;
  choices?: { delta?: { content?: unknown } }[];
  usage?: { completion_tokens?: unknown } | null;
}

export class RelayStreamReader {
  readonly #decoder = new StringDecoder("utf8");
  #buffer = "";
  #done = false;
  #problem: string | undefined;
  #usageTokens: number | undefined;
  contentChunks = 0;

  constructor(
    private readonly expectedTokens: number,
    /** Called once per content chunk with the time its bytes were read. */
    private readonly onToken: (atMs: number) => void,
  ) {}

  /** Bytes read at `atMs`. */
  push(bytes: Buffer, atMs: number): void {
    this.#buffer += this.#decoder.write(bytes);
    let boundary: number;
    while ((boundary = this.#buffer.indexOf("\n\n")) !== -1) {
      const event = this.#buffer.slice(0, boundary);
      this.#buffer = this.#buffer.slice(boundary + 2);
      this.#event(event, atMs);
    }
  }

  #event(event: string, atMs: number): void {
    if (this.#problem !== undefined) return;
    let data: string | undefined;
    for (const line of event.split("\n")) {
      if (!line.startsWith("data:")) continue;
      const payload = line.slice(line.startsWith("data: ") ? 6 : 5).replace(/\r$/, "");
      data = data === undefined ? payload : `${data}\n${payload}`;
    }
    if (data === undefined) return;
    if (this.#done) {
      this.#problem = "data after [DONE]";
      return;
    }
    if (data === "[DONE]") {
      this.#done = true;
      return;
    }
    let chunk: ChunkShape;
    try {
      chunk = JSON.parse(data) as ChunkShape;
    } catch {
      this.#problem = "an event that is not JSON";
      return;
    }
    if (chunk.error !== undefined) {
      this.#problem = `an error event: ${JSON.stringify(chunk.error).slice(0, 200)}`;
      return;
    }
    if (chunk.object !== "chat.completion.chunk") {
      this.#problem = `an event that is not a chat.completion.chunk (${String(chunk.object)})`;
      return;
    }
    const content = chunk.choices?.[0]?.delta?.content;
    if (typeof content === "string" && content.length > 0) {
      this.contentChunks++;
      this.onToken(atMs);
    }
    const completionTokens = chunk.usage?.completion_tokens;
    if (typeof completionTokens === "number") this.#usageTokens = completionTokens;
  }

  /** The verdict once the body has ended (or broke off: `brokenOff`). */
  end(brokenOff?: string): StreamVerdict {
    this.#buffer += this.#decoder.end();
    if (this.#problem !== undefined) return { ok: false, reason: this.#problem };
    if (brokenOff !== undefined) return { ok: false, reason: `broke off after ${this.contentChunks} tokens: ${brokenOff}` };
    if (this.#buffer.trim().length > 0) return { ok: false, reason: "an unterminated event at the end" };
    if (!this.#done) return { ok: false, reason: `ended without [DONE] after ${this.contentChunks} tokens` };
    if (this.contentChunks !== this.expectedTokens) {
      return { ok: false, reason: `${this.contentChunks} content chunks instead of ${this.expectedTokens}` };
    }
    if (this.#usageTokens !== this.expectedTokens) {
      return { ok: false, reason: `usage said ${String(this.#usageTokens)} completion tokens instead of ${this.expectedTokens}` };
    }
    return { ok: true };
  }
}
