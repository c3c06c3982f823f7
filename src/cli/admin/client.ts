import { OpenAIErrorBody } from "../../protocol/errors.js";
import type { Connection } from "./connection.js";
import { AdminHttpError, ConnectionError } from "./errors.js";

export type Method = "GET" | "POST" | "PATCH" | "DELETE";

/** Talks to the edge's admin API; every non-2xx answer becomes an AdminHttpError carrying the OpenAI error message. */
export class AdminClient {
  constructor(
    private readonly connection: Connection,
    private readonly fetchImpl: typeof fetch,
  ) {}

  async json(method: Method, path: string, body?: unknown): Promise<unknown> {
    const res = await this.send(method, path, body);
    const text = await res.text();
    try {
      return JSON.parse(text);
    } catch {
      throw new AdminHttpError(res.status, null, `The edge answered ${method} ${path} with something that is not JSON.`);
    }
  }

  async text(method: Method, path: string): Promise<string> {
    return (await this.send(method, path)).text();
  }

  private async send(method: Method, path: string, body?: unknown): Promise<Response> {
    const url = `${this.connection.baseUrl}${path}`;
    let res: Response;
    try {
      res = await this.fetchImpl(url, {
        method,
        headers: {
          authorization: `Bearer ${this.connection.adminToken}`,
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (error) {
      const cause = error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);
      throw new ConnectionError(`Cannot reach the edge at ${this.connection.baseUrl}: ${cause}`);
    }
    if (res.ok) return res;
    const text = await res.text().catch(() => "");
    let parsed: ReturnType<typeof OpenAIErrorBody.safeParse> | undefined;
    try {
      parsed = OpenAIErrorBody.safeParse(JSON.parse(text));
    } catch {
      parsed = undefined;
    }
    if (parsed?.success) throw new AdminHttpError(res.status, parsed.data.error.code, parsed.data.error.message);
    throw new AdminHttpError(res.status, null, text.trim().slice(0, 300) || res.statusText || "request failed");
  }
}
