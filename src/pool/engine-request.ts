/*
 * How a call is sent to one engine. A call in chat completions or completions goes as
 * it came: every engine kind serves both. A Messages or Responses call has two forms:
 * its own API, for an engine configured to serve it natively (vLLM serves both, as the
 * simulated engine does), and a chat completion, for any other engine, whose answer is
 * translated back. Which form an attempt uses is decided when the attempt is placed,
 * so a retry on another engine can take the other form.
 */

/** The model-calling APIs the pool serves, by the name the engine config uses. */
export const CALL_APIS = ["chat", "completions", "messages", "responses"] as const;
export type CallApi = (typeof CALL_APIS)[number];

/** The APIs an engine can be configured to serve natively (`nativeApis`); chat and completions need no word. */
export const NATIVE_APIS = ["messages", "responses"] as const satisfies readonly CallApi[];
export type NativeApi = (typeof NATIVE_APIS)[number];

export interface EngineRequestForm {
  /** The API the body is in: the engine adapter shapes the body by it, the relay reads the answer's usage by it. */
  api: CallApi;
  /** The engine's path for that API. */
  path: string;
  /** The body before the engine adapter's changes (model name, priority, usage options). */
  body: Record<string, unknown>;
  /** Turns the engine's answer into the call's answer (a chat translation, or the pool's IDs on a native one); absent: as is. */
  answer?: (answer: Response) => Promise<Response>;
}

/** A call's forms: its own API, and when that is not chat or completions, the chat completion any engine serves. */
export interface CallForms {
  native: EngineRequestForm;
  viaChat?: EngineRequestForm;
}

/** The form to send to an engine that serves `nativeApis` natively. */
export function formFor(forms: CallForms, nativeApis: ReadonlySet<CallApi>): EngineRequestForm {
  return forms.viaChat === undefined || nativeApis.has(forms.native.api) ? forms.native : forms.viaChat;
}
