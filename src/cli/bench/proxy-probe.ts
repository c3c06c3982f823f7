import { engineActivity } from "./proxy-engine-metrics.js";
import type { BenchTarget } from "./proxy-targets.js";
import { type ChatWorkload, type CompletionSummary, chatRequestBody, summariseCompletion } from "./proxy-workload.js";

/*
 * Before any figure is taken, one call through each target must reach the engine
 * (its success counter moves) and come back as the engine's own completion (same
 * text and usage as a direct call), so a proxy that answers from elsewhere, or
 * with an error, is caught before it is measured.
 */

async function postChat(target: BenchTarget, body: string, extraHeaders: Record<string, string>) {
  const res = await fetch(target.url, {
    method: "POST",
    headers: { ...target.headers, ...extraHeaders },
    body,
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, text: await res.text() };
}

/** The engine's own answer to the workload's request. */
export async function referenceCompletion(engineUrl: string, workload: ChatWorkload): Promise<CompletionSummary> {
  const res = await fetch(`${engineUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: chatRequestBody(workload),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`engine ${engineUrl} answered ${res.status}: ${text.slice(0, 500)}`);
  return summariseCompletion(workload.mode, text);
}

export interface ProbeOutcome {
  target: string;
  mode: string;
  status: number;
  reachedEngine: boolean;
  matchesEngine: boolean;
}

/** One call through the target; throws, with what came back, unless it is the engine's answer. */
export async function probeTarget(target: BenchTarget, workload: ChatWorkload, reference: CompletionSummary): Promise<ProbeOutcome> {
  const body = chatRequestBody(workload);
  const prepared = await target.prepareRun({ body, connections: 1, durationSeconds: 1, expectedRps: 1 });
  const session = prepared.session();
  const before = (await engineActivity(target.engineUrl)).finished;
  const { status, text } = await postChat(target, body, session.headers());
  const after = (await engineActivity(target.engineUrl)).finished;
  const problem = (reason: string) =>
    new Error(`${target.label} (${workload.mode}) probe failed: ${reason}\nstatus ${status}, body: ${text.slice(0, 800)}`);
  if (status !== 200) throw problem("expected status 200");
  let summary: CompletionSummary;
  try {
    summary = summariseCompletion(workload.mode, text);
  } catch (error) {
    throw problem(`not a complete completion (${error instanceof Error ? error.message : String(error)})`);
  }
  if (after <= before) throw problem("the engine's success counter did not move: the call never reached the engine");
  if (summary.content !== reference.content || summary.completionTokens !== reference.completionTokens) {
    throw problem(`body differs from the engine's direct answer (${JSON.stringify(reference)} vs ${JSON.stringify(summary)})`);
  }
  if (workload.mode === "streaming" && summary.contentChunks !== reference.contentChunks) {
    throw problem(`${summary.contentChunks} text chunks, the engine sends ${reference.contentChunks}`);
  }
  return { target: target.name, mode: workload.mode, status, reachedEngine: true, matchesEngine: true };
}
