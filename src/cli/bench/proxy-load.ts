import type { EventEmitter } from "node:events";
import { createRequire } from "node:module";
import { createHistogram } from "node:perf_hooks";

/*
 * One closed-loop load run with autocannon's programmatic API: N connections, each
 * sending the next request as soon as the previous response ended. autocannon's
 * own latency histogram has whole-millisecond resolution, too coarse for a proxy
 * hop on loopback, so latencies are recorded here in microseconds from its
 * per-response event (2xx only, as autocannon does).
 */

/** The subset of autocannon 9's API used here (it ships no types). */
interface AutocannonRequestParams {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string | Buffer;
}
interface AutocannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  setupRequest?: (request: AutocannonRequestParams, context: object) => AutocannonRequestParams;
  onResponse?: (status: number, body: string, context: object, headers: Record<string, string | string[]>) => void;
}
interface AutocannonClient {
  setRequests(requests: AutocannonRequest[]): void;
}
interface AutocannonOptions {
  url: string;
  connections: number;
  duration: number;
  timeout: number;
  /** ms between throughput samples (and stop checks). */
  sampleInt: number;
  method: string;
  headers: Record<string, string>;
  body: string;
  setupClient: (client: AutocannonClient) => void;
}
interface AutocannonResult {
  /** Seconds. */
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodeStats: Record<string, { count: number }>;
}
interface AutocannonInstance extends EventEmitter {
  stop(): void;
}
type Autocannon = (
  options: AutocannonOptions,
  done: (error: Error | null, result: AutocannonResult) => void,
) => AutocannonInstance;

const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;

/** Per-connection request state: extra headers for each request, and what the response said. */
export interface ConnectionSession {
  /** Called synchronously before every request on this connection. */
  headers(): Record<string, string>;
  onResponse?(status: number, headers: Record<string, string | string[]>): void;
}

export interface LoadPlan {
  /** Full URL, path included. */
  url: string;
  /** Headers every request carries. */
  headers: Record<string, string>;
  body: string;
  /** A new session for each connection. */
  session: () => ConnectionSession;
  /** True only for a complete, correct response body. */
  verifyBody: (body: string) => boolean;
}

export interface LoadRunOptions {
  connections: number;
  durationSeconds: number;
  /** Per-request timeout in seconds. */
  timeoutSeconds?: number;
  signal?: AbortSignal;
}

export interface LatencySummary {
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  max: number;
}

export interface LoadFigures {
  connections: number;
  durationSeconds: number;
  /** Completed responses (any status). */
  responses: number;
  requestsPerSecond: number;
  /** Of 2xx responses, in ms. */
  latencyMs: LatencySummary;
  non2xx: number;
  /** Connection errors, timeouts included. */
  errors: number;
  timeouts: number;
  /** 2xx responses whose body was not a complete completion. */
  mismatches: number;
  statusCodes: Record<string, number>;
}

/** Failures of a run: anything but verified 2xx responses. */
export function failuresOf(figures: LoadFigures): number {
  return figures.non2xx + figures.errors + figures.mismatches;
}

const round3 = (value: number) => Math.round(value * 1000) / 1000;

export function runLoad(plan: LoadPlan, options: LoadRunOptions): Promise<LoadFigures> {
  const { url, headers, body, session, verifyBody } = plan;
  const target = new URL(url);
  const latencyUs = createHistogram({ lowest: 1, highest: 600_000_000, figures: 3 });
  let responses = 0;
  let mismatches = 0;
  // autocannon's verifyBody sees error bodies too; only a 2xx with a bad body is a mismatch.
  const onResponse = (state: ConnectionSession, status: number, responseBody: string, responseHeaders: Record<string, string | string[]>) => {
    responses++;
    if (status >= 200 && status < 300 && !verifyBody(responseBody)) mismatches++;
    state.onResponse?.(status, responseHeaders);
  };

  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) return reject(options.signal.reason);
    const instance = autocannon(
      {
        url: target.origin,
        connections: options.connections,
        duration: options.durationSeconds,
        timeout: options.timeoutSeconds ?? 30,
        // autocannon stops at its first sample tick after the duration; 100 ms keeps runs close to it.
        sampleInt: 100,
        method: "POST",
        headers,
        body,
        // Each connection gets its own request object and session (autocannon resets
        // the per-request `context` after every request of a one-request list).
        setupClient(client) {
          const state = session();
          client.setRequests([
            {
              method: "POST",
              path: `${target.pathname}${target.search}`,
              headers,
              body,
              setupRequest: (request) => ({ ...request, headers: { ...request.headers, ...state.headers() } }),
              onResponse: (status, responseBody, _context, responseHeaders) => onResponse(state, status, responseBody, responseHeaders),
            },
          ]);
        },
      },
      (error, result) => {
        options.signal?.removeEventListener("abort", stop);
        if (error) return reject(error);
        if (options.signal?.aborted) return reject(options.signal.reason);
        const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count]));
        const hasSamples = latencyUs.count > 0;
        const ms = (us: number) => (hasSamples ? round3(us / 1000) : Number.NaN);
        resolve({
          connections: options.connections,
          durationSeconds: result.duration,
          responses,
          requestsPerSecond: result.duration > 0 ? Math.round((responses / result.duration) * 10) / 10 : 0,
          latencyMs: {
            p50: ms(latencyUs.percentile(50)),
            p90: ms(latencyUs.percentile(90)),
            p99: ms(latencyUs.percentile(99)),
            mean: ms(latencyUs.mean),
            max: ms(latencyUs.max),
          },
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          mismatches,
          statusCodes,
        });
      },
    );
    instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTimeMs: number) => {
      if (statusCode >= 200 && statusCode < 300) latencyUs.record(Math.max(1, Math.round(responseTimeMs * 1000)));
    });
    const stop = () => instance.stop();
    options.signal?.addEventListener("abort", stop, { once: true });
  });
}
