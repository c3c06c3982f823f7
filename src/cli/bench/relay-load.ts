import { setMaxListeners } from "node:events";
import { createHistogram, type RecordableHistogram } from "node:perf_hooks";
import type { Pool } from "undici";
import { CpuSampler } from "./relay-cpu.js";
import { RelayStreamReader, type StreamVerdict } from "./relay-stream-reader.js";

/*
 * One level of the relay benchmark: N concurrent streams, each on its own connection,
 * started evenly over one token interval (so the source's ticks are spread as a real
 * engine's streams would be; `staggerMs` widens it), each asking for `tokens` tokens. Every token's arrival
 * at the client is counted in 1 ms buckets, so the delivered rate can be taken over
 * the steady window afterwards: from the moment every stream has its first token to
 * the moment the first stream has its last (all streams active, ramp up and down
 * excluded). Inter-token gaps and time to first token are recorded per stream.
 */

export interface RelayLevelPlan {
  /** A connection pool to the target's origin with at least `streams` connections. */
  dispatcher: Pool;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** Extra headers of each stream, taken synchronously as it starts (the pool's signatures). */
  streamHeaders: () => Record<string, string>;
  streams: number;
  tokens: number;
  intervalMs: number;
  /** Streams start evenly over this long (default: one interval). */
  staggerMs?: number;
  /** The whole level is cut off after this long; streams still open then fail. */
  deadlineMs: number;
  /** CPU readers of the processes whose share is reported (name → CPU ms so far). */
  cpu: Record<string, () => number | undefined>;
  signal?: AbortSignal;
}

export interface PercentilesMs {
  p50: number;
  p99: number;
  max: number;
}

export interface RelayLevelFigures {
  streams: number;
  tokens: number;
  intervalMs: number;
  /** Streams that delivered exactly `tokens` verified content chunks. */
  completed: number;
  failed: number;
  /** Failure reasons (numbers masked, so alike reasons group), with counts. */
  failureReasons: Record<string, number>;
  offeredTokensPerSecond: number;
  /** Tokens per second at the client over the steady window (or the whole run when it had none); null if no token arrived. */
  deliveredTokensPerSecond: number | null;
  /**
   * Relative to the level's start; null when every stream was active together for less
   * than half a stream's length (then the rate is over the whole run, ramps included).
   */
  steadyWindowMs: { from: number; to: number } | null;
  tokensReceived: number;
  /** Between consecutive tokens of a stream at the client; null without any. */
  gapMs: PercentilesMs | null;
  /** From sending the request to the first content chunk. */
  ttftMs: PercentilesMs | null;
  /** CPU of each process over the steady window, % of one core. */
  cpuPercent: Record<string, number | null>;
  /** Level wall time, first request to last stream ended. */
  wallMs: number;
}

interface StreamRecord {
  firstTokenMs: number | undefined;
  lastTokenMs: number | undefined;
  verdict: StreamVerdict | undefined;
}

const round3 = (value: number) => Math.round(value * 1000) / 1000;

function percentiles(histogram: RecordableHistogram): PercentilesMs | null {
  if (histogram.count === 0) return null;
  return {
    p50: round3(histogram.percentile(50) / 1000),
    p99: round3(histogram.percentile(99) / 1000),
    max: round3(histogram.max / 1000),
  };
}

function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  return [typeof code === "string" ? code : undefined, error.message].filter(Boolean).join(": ");
}

export async function runRelayLevel(plan: RelayLevelPlan): Promise<RelayLevelFigures> {
  const { streams, tokens, intervalMs } = plan;
  const gapUs = createHistogram({ lowest: 1, highest: 600_000_000, figures: 3 });
  const ttftUs = createHistogram({ lowest: 1, highest: 600_000_000, figures: 3 });
  /** Tokens arrived in each ms since the start. */
  const arrivals: number[] = [];
  const records: StreamRecord[] = [];
  const cutOff = new AbortController();
  // One listener per stream request.
  setMaxListeners(streams + 10, cutOff.signal);
  const onAbort = () => cutOff.abort(plan.signal?.reason);
  plan.signal?.addEventListener("abort", onAbort, { once: true });
  const sampler = new CpuSampler(plan.cpu);
  const startedAt = performance.now();
  const deadline = setTimeout(() => cutOff.abort(new Error(`level deadline of ${plan.deadlineMs} ms passed`)), plan.deadlineMs);

  const runStream = async (record: StreamRecord): Promise<void> => {
    const sentAt = performance.now();
    let lastToken: number | undefined;
    const reader = new RelayStreamReader(tokens, (atMs) => {
      if (lastToken === undefined) {
        record.firstTokenMs = atMs - startedAt;
        ttftUs.record(Math.max(1, Math.round((atMs - sentAt) * 1000)));
      } else {
        gapUs.record(Math.max(1, Math.round((atMs - lastToken) * 1000)));
      }
      lastToken = atMs;
      record.lastTokenMs = atMs - startedAt;
      const bucket = Math.floor(atMs - startedAt);
      arrivals[bucket] = (arrivals[bucket] ?? 0) + 1;
    });
    try {
      const response = await plan.dispatcher.request({
        path: plan.path,
        method: "POST",
        headers: { ...plan.headers, ...plan.streamHeaders() },
        body: plan.body,
        signal: cutOff.signal,
      });
      if (response.statusCode !== 200) {
        const text = await response.body.text().catch(() => "");
        record.verdict = { ok: false, reason: `status ${response.statusCode}: ${text.slice(0, 160)}` };
        return;
      }
      await new Promise<void>((resolve) => {
        response.body.on("data", (bytes: Buffer) => reader.push(bytes, performance.now()));
        response.body.once("end", () => {
          record.verdict = reader.end();
          resolve();
        });
        response.body.once("error", (error: unknown) => {
          record.verdict = reader.end(errorText(error));
          resolve();
        });
      });
    } catch (error) {
      record.verdict = reader.end(errorText(error));
    }
  };

  // Streams start evenly over one interval, those of the same millisecond from one timer.
  const started: Promise<void>[] = [];
  const starts = new Map<number, StreamRecord[]>();
  for (let index = 0; index < streams; index++) {
    const record: StreamRecord = { firstTokenMs: undefined, lastTokenMs: undefined, verdict: undefined };
    records.push(record);
    const offset = Math.floor((index * (plan.staggerMs ?? intervalMs)) / streams);
    starts.set(offset, [...(starts.get(offset) ?? []), record]);
  }
  await Promise.all(
    [...starts].map(
      ([offset, batch]) =>
        new Promise<void>((resolve) =>
          setTimeout(() => {
            for (const record of batch) started.push(runStream(record));
            resolve();
          }, offset),
        ),
    ),
  );
  await Promise.all(started);
  const wallMs = performance.now() - startedAt;
  clearTimeout(deadline);
  sampler.stop();
  plan.signal?.removeEventListener("abort", onAbort);
  plan.signal?.throwIfAborted();

  const failureReasons: Record<string, number> = {};
  let completed = 0;
  for (const { verdict } of records) {
    if (verdict?.ok) completed++;
    else {
      const reason = (verdict?.reason ?? "never ended").replace(/\d+/g, "N");
      failureReasons[reason] = (failureReasons[reason] ?? 0) + 1;
    }
  }

  const isTime = (t: number | undefined): t is number => t !== undefined;
  const firsts = records.map((r) => r.firstTokenMs).filter(isTime);
  const lasts = records.map((r) => r.lastTokenMs).filter(isTime);
  const received = arrivals.reduce((sum, count) => sum + (count ?? 0), 0);
  let window: { from: number; to: number } | null = null;
  if (firsts.length === streams) {
    const from = Math.ceil(Math.max(...firsts));
    const to = Math.floor(Math.min(...lasts));
    // A short window says nothing about a steady rate: right after a stall, tokens held
    // up arrive together and such a window can show more than the offered rate.
    if (to - from >= Math.max(4 * intervalMs, ((tokens - 1) * intervalMs) / 2)) window = { from, to };
  }
  const span = window ?? (received > 0 ? { from: Math.floor(Math.min(...firsts)), to: Math.ceil(Math.max(...lasts)) } : { from: 0, to: 0 });
  let delivered: number | null = null;
  if (received > 0 && span.to > span.from) {
    let inSpan = 0;
    for (let ms = span.from; ms < span.to; ms++) inSpan += arrivals[ms] ?? 0;
    delivered = Math.round((inSpan / (span.to - span.from)) * 1000);
  }

  return {
    streams,
    tokens,
    intervalMs,
    completed,
    failed: streams - completed,
    failureReasons,
    offeredTokensPerSecond: Math.round((streams * 1000) / intervalMs),
    deliveredTokensPerSecond: delivered,
    steadyWindowMs: window,
    tokensReceived: received,
    gapMs: percentiles(gapUs),
    ttftMs: percentiles(ttftUs),
    cpuPercent: sampler.sharesOver(startedAt + span.from, startedAt + span.to),
    wallMs: Math.round(wallMs),
  };
}
