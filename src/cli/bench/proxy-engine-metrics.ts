/*
 * Reads the simulated engine's vLLM metrics: to check that a probe reached the
 * engine, and to let a target drain between runs (calls a proxy still holds when a
 * run's connections close must not load the next target's run).
 */

export interface EngineActivity {
  running: number;
  waiting: number;
  /** vllm:request_success_total over its label sets. */
  finished: number;
}

function metricSum(text: string, name: string): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

export async function engineActivity(engineUrl: string): Promise<EngineActivity> {
  const res = await fetch(`${engineUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${engineUrl}/metrics answered ${res.status}`);
  return {
    running: metricSum(text, "vllm:num_requests_running"),
    waiting: metricSum(text, "vllm:num_requests_waiting"),
    finished: metricSum(text, "vllm:request_success_total"),
  };
}

const POLL_MS = 100;
const QUIET_POLLS = 3;

/**
 * Resolves once the engine has had nothing running or waiting and finished no new
 * call for QUIET_POLLS polls in a row; false if that did not happen within timeoutMs.
 */
export async function waitForEngineIdle(engineUrl: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let quiet = 0;
  let last = await engineActivity(engineUrl);
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    signal?.throwIfAborted();
    const now = await engineActivity(engineUrl);
    const idle = now.running === 0 && now.waiting === 0 && now.finished === last.finished;
    quiet = idle ? quiet + 1 : 0;
    last = now;
    if (quiet >= QUIET_POLLS) return true;
  }
  return false;
}
