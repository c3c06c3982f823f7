import type { z } from "zod";
import { invalidRequest, openAIError } from "../../protocol/errors.js";

const tooLarge = (maxBytes: number) =>
  openAIError(413, `Request body too large: the limit is ${maxBytes} bytes.`, { code: "request_too_large" });

/**
 * The request body's exact bytes, refusing more than `maxBytes`: first by the
 * declared Content-Length, then by counting what actually arrives (a chunked or
 * lying sender is cut off as soon as it passes the limit).
 */
export async function readBodyWithin(request: Request, maxBytes: number): Promise<Uint8Array<ArrayBuffer>> {
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

/** Parses UTF-8 JSON, answering 400 in OpenAI's shape when it is not. */
export function parseJsonBytes(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw openAIError(400, "Request body is not valid UTF-8.", { code: "invalid_json" });
  }
  if (text.trim() === "") throw openAIError(400, "Request body is empty; expected a JSON object.", { code: "invalid_json" });
  try {
    return JSON.parse(text);
  } catch (error) {
    const detail = error instanceof Error ? error.message : "unparseable";
    throw openAIError(400, `Request body is not valid JSON: ${detail}`, { code: "invalid_json" });
  }
}

/** Parses and validates a JSON body; an empty body counts as `{}` when `emptyAsObject`. */
export async function readJsonBody<T extends z.ZodType>(
  request: Request,
  schema: T,
  options: { maxBytes: number; emptyAsObject?: boolean },
): Promise<z.infer<T>> {
  const bytes = await readBodyWithin(request, options.maxBytes);
  const json = bytes.byteLength === 0 && options.emptyAsObject ? {} : parseJsonBytes(bytes);
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw invalidRequest(parsed.error);
  return parsed.data;
}
