import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { getRequestListener } from "@hono/node-server";
import { type CallRoutes, poolErrorResponse, poolHeadersOf, withPoolHeaders } from "./call-routes.js";
import type { CallVerifier } from "./verify-forward.js";
import { nodeClientLink } from "./client-link.js";
import { type CallAnswer, DirectAnswer } from "./direct-answer.js";
import type { Dispatcher } from "./dispatcher.js";
import { nodeSignedRequest } from "./signed-request.js";

/*
 * The pool's calls, served from Node's request and response in front of Hono. A call
 * went through @hono/node-server's Request wrapper (its URL built and checked, an
 * AbortController for its signal), Hono's router, context and middleware chain, and
 * back through the node server's handling of RESPONSE_ALREADY_SENT; none of it did
 * anything for a call, whose checks read Node's message and whose answer is written
 * to Node's response anyway (direct-answer.ts). Exactly the four call routes are taken
 * here (POST, the path as the edge sends it, any query ignored as Hono's router does, a
 * plain Host); every other request, and any other spelling of those paths or of the
 * Host, goes to Hono as before.
 *
 * Same checks (the routes' own verifiers, shared with Hono's routes: call-routes.ts),
 * same queue, same answers: an answer that cannot be written straight (a refusal, a
 * translated answer) is handed to @hono/node-server's own writer, which also drains or
 * drops what is left of a refused request's body.
 */

export interface CallListenerDeps {
  calls: CallRoutes;
  dispatcher: Dispatcher;
  /** The Host a request without one is taken to have named (HTTP/1.0), as @hono/node-server's `hostname`. */
  hostname?: string | undefined;
}

/**
 * A Host that @hono/node-server takes as it is (its own test, in its request wrapper). A
 * call naming any other (a capital, an IPv6 literal, a port it does not list, or a
 * malformed one) goes to Hono through it, which checks it as before: 400 for a malformed one.
 */
const PLAIN_HOST = /^[a-z0-9._-]+(?::(?:[1-5]\d{3,4}|[6-9]\d{3}))?$/;

/** The call routes' path of a request target: the path without its query, when it is one of them. */
function callPathOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}

/**
 * Writes an engine's answer straight to the call's response, once, where the dispatcher
 * hands it over (CallSubmission.takeAnswer: for a whole answer, inside undici's callback
 * of the engine's last byte), else when submit() resolves with it. A write that throws
 * is answered as a refusal (what a handler's throw got), and never thrown into the
 * dispatcher or undici.
 */
class AnswerWriter {
  #written = false;

  constructor(
    readonly dispatcher: Dispatcher,
    readonly incoming: IncomingMessage,
    readonly outgoing: ServerResponse,
    readonly respond: (incoming: IncomingMessage, outgoing: ServerResponse, response: Response) => void,
  ) {}

  write(answer: DirectAnswer): void {
    if (this.#written) return;
    this.#written = true;
    try {
      answer.write(this.outgoing, poolHeadersOf(this.dispatcher));
    } catch (error) {
      this.respond(this.incoming, this.outgoing, poolErrorResponse(error));
    }
  }
}

export function callListener(deps: CallListenerDeps, fallback: RequestListener): RequestListener {
  const { calls, dispatcher, hostname } = deps;
  /** Writes `response` as the node server writes a handler's answer. */
  const respond = (incoming: IncomingMessage, outgoing: ServerResponse, response: Response): void => {
    void getRequestListener(() => response, { hostname })(incoming, outgoing);
  };

  const serve = async (verify: CallVerifier, incoming: IncomingMessage, outgoing: ServerResponse): Promise<void> => {
    let answer: CallAnswer;
    const writer = new AnswerWriter(dispatcher, incoming, outgoing, respond);
    try {
      // The dispatcher's promise awaited here, not through answerCall's: two promise hops fewer between the engine's answer and its write.
      const { fields, request, forms } = await verify(nodeSignedRequest(incoming));
      answer = await dispatcher.submit({
        fields,
        request,
        forms,
        client: nodeClientLink(incoming, outgoing),
        // A method, not an arrow property: the pool's tsx renames each named closure it makes (relay-attempt.ts).
        takeAnswer(direct) {
          writer.write(direct);
        },
      });
    } catch (error) {
      respond(incoming, outgoing, poolErrorResponse(error));
      return;
    }
    if (answer instanceof DirectAnswer) writer.write(answer);
    else respond(incoming, outgoing, withPoolHeaders(answer, poolHeadersOf(dispatcher)));
  };

  return (incoming, outgoing) => {
    const host = incoming.headers.host;
    const path = incoming.method === "POST" && host !== undefined && PLAIN_HOST.test(host) ? callPathOf(incoming.url) : undefined;
    const verify = path === undefined ? undefined : calls.get(path);
    if (verify === undefined) {
      fallback(incoming, outgoing);
      return;
    }
    // A bug guard, not a path: what Hono's onError did for a handler that threw.
    serve(verify, incoming, outgoing).catch((error: unknown) => respond(incoming, outgoing, poolErrorResponse(error)));
  };
}
