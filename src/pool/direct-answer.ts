import type { ServerResponse } from "node:http";

/*
 * An engine's answer as the relay hands it over (relay.ts). The pool's server writes it
 * straight to the client's Node response: a relayed stream without a web-stream reader,
 * its headers in the first write; a whole answer without a Headers object built and
 * read back. Anyone else (a translation of it, Hono's app.request() in tests, the split
 * flows) asks it for the Response it stands for, which is built only then: an answer
 * written straight never makes one (for a stream, a ReadableStream, whose constructor
 * in Node 20 also makes it transferable, and a Response).
 *
 * What waits for the answer to leave (a whole answer's attempt end: relay.ts
 * endAfterAnswer) runs once it is written, or once its Response is handed out.
 */

/** Writes the answer with these headers added (the pool's load, known only when it is sent). */
export type DirectWriter = (outgoing: ServerResponse, extraHeaders: Readonly<Record<string, string>>) => void;

export class DirectAnswer {
  readonly #build: () => Response;
  readonly #write: DirectWriter;
  #response: Response | undefined;
  #written = false;
  #afterwards: (() => void) | undefined;

  /** `build`: the Response it stands for; `write`: how it is written straight. Either is used, once. */
  constructor(build: () => Response, write: DirectWriter) {
    this.#build = build;
    this.#write = write;
  }

  /** Runs `run` once when the answer has left: written, or its Response handed out. */
  afterHandingOver(run: () => void): void {
    this.#afterwards = run;
  }

  /** The Response it stands for (the same one at every ask); it is no longer written straight. */
  response(): Response {
    if (this.#written) throw new Error("direct answer: already written straight");
    this.#response ??= this.#build();
    this.#handedOver();
    return this.#response;
  }

  /** Writes it to `outgoing` with these headers added. */
  write(outgoing: ServerResponse, extraHeaders: Readonly<Record<string, string>>): void {
    if (this.#written || this.#response !== undefined) throw new Error("direct answer: already handed over");
    this.#written = true;
    this.#write(outgoing, extraHeaders);
    this.#handedOver();
  }

  #handedOver(): void {
    const run = this.#afterwards;
    this.#afterwards = undefined;
    run?.();
  }
}

/**
 * Headers as Node's `writeHead` takes them most cheaply: one flat `[name, value, …]` list,
 * the answer's own then the added ones (their names are distinct: the pool's load, the
 * engine's content type and the call's stats). Node reads a list by index; an object
 * spread from both (`{ ...own, ...added }`) was built, then walked with for…in and
 * hasOwnProperty: ~4 µs of a server's CPU per answer in a loop of 8,000 small answers
 * over one keep-alive socket (22 vs 18 µs).
 */
export function headerList(own: Readonly<Record<string, string>>, added: Readonly<Record<string, string>>): string[] {
  const list: string[] = [];
  for (const name in own) list.push(name, own[name] as string);
  for (const name in added) list.push(name, added[name] as string);
  return list;
}

/** A call's answer: a Response, or an engine's answer the server may write straight. */
export type CallAnswer = Response | DirectAnswer;

/** The Response an answer is or stands for. */
export function answerResponse(answer: CallAnswer): Response {
  return answer instanceof DirectAnswer ? answer.response() : answer;
}
