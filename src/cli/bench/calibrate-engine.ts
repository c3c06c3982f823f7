/*
 * The simulated engine's figures, measured by driving EngineModel (never read from
 * its profile), side by side with the published figures of
 * /work/shared/reference/workloads-and-engines.md ("Engine timing (H100, bf16)").
 */

import { EngineModel } from "../../sim/engine-model.js";
import type { EngineProfileName } from "../../sim/profiles.js";

/** Distinct prompt tokens, so requests share nothing in the prefix cache. */
function prompt(request: number, length: number): string[] {
  const tokens = new Array<string>(length);
  for (let i = 0; i < length; i++) tokens[i] = `r${request}t${i} `;
  return tokens;
}

/**
 * Duration of one pure decode step: `batch` sequences, each with `context` tokens
 * (the new one included). All prompts are prefilled in one step first (budget raised
 * for the measurement), so every sequence then decodes at the same context.
 */
export function measureDecodeStepMs(profile: EngineProfileName, batch: number, context: number): number {
  const model = new EngineModel({ profile, maxNumSeqs: Math.max(batch, 1), maxBatchedTokens: batch * context });
  for (let r = 0; r < batch; r++) model.submit({ id: `d${r}`, promptTokens: prompt(r, context - 1), maxTokens: 4, ignoreEos: true }, 0);
  const prefill = model.startStep(0);
  if (prefill === undefined) throw new Error("engine did not start the prefill");
  model.finishStep();
  if (model.numRunning !== batch) throw new Error(`expected ${batch} running sequences, got ${model.numRunning}`);
  const decode = model.startStep(prefill);
  if (decode === undefined) throw new Error("engine did not decode");
  model.finishStep();
  return decode;
}

/** Prefill rate of one prompt alone, with the engine's default per-step budget (chunked prefill): tokens / time to first token. */
export function measurePrefillTokensPerSec(profile: EngineProfileName, promptTokens: number): { tokensPerSec: number; ttftMs: number; steps: number } {
  const model = new EngineModel({ profile });
  model.submit({ id: "p", promptTokens: prompt(0, promptTokens), maxTokens: 1, ignoreEos: true }, 0);
  let now = 0;
  let steps = 0;
  for (;;) {
    const duration = model.startStep(now);
    if (duration === undefined) throw new Error("the prompt never produced a token");
    now += duration;
    steps += 1;
    if (model.finishStep().some((event) => event.type === "first_token")) break;
  }
  return { tokensPerSec: (promptTokens / now) * 1_000, ttftMs: now, steps };
}

/**
 * KV capacity: with sequence and token limits lifted, the tokens of distinct
 * `promptTokens`-long prompts (whole blocks) the engine admits at once before it
 * runs out of KV blocks. Doubles the number of prompts until some are left waiting.
 */
export function measureKvCapacityTokens(profile: EngineProfileName, promptTokens = 160): number {
  for (let count = 1_024; count * promptTokens <= 100_000_000; count *= 2) {
    const model = new EngineModel({ profile, maxNumSeqs: count, maxBatchedTokens: count * promptTokens });
    for (let r = 0; r < count; r++) model.submit({ id: `k${r}`, promptTokens: prompt(r, promptTokens), maxTokens: 1, ignoreEos: true }, 0);
    if (model.startStep(0) === undefined) throw new Error("engine admitted nothing");
    if (model.numWaiting > 0) return model.numRunning * promptTokens;
  }
  throw new Error("KV capacity not reached");
}

export interface CalibrationRow {
  figure: string;
  simulated: string;
  reference: string;
}

const ms = (value: number) => `${value.toFixed(2)} ms`;
const rate = (value: number) => `${(value / 1_000).toFixed(1)}k tokens/s`;

/**
 * The reference's decode formula for Llama-3.1-8B on one H100, evaluated as the
 * reference states it (≈ 7 ms + 4.4 µs·B + 0.076 µs·ΣC): the published figure the
 * model is compared with, not the model's own code.
 */
function referenceDecodeMs(batch: number, context: number): number {
  return 7 + 4.4e-3 * batch + 0.076e-3 * batch * context;
}

export function engineCalibration(profile: EngineProfileName): CalibrationRow[] {
  const context = 2_048;
  const rows: CalibrationRow[] = [];
  for (const batch of [1, 64]) {
    rows.push({
      figure: `decode step, batch ${batch}, context ${context.toLocaleString("en-US")} each`,
      simulated: ms(measureDecodeStepMs(profile, batch, context)),
      reference: `${ms(referenceDecodeMs(batch, context))} (7 ms + 4.4 µs·B + 0.076 µs·ΣC, BLIS)`,
    });
  }
  for (const tokens of [2_048, 8_192]) {
    const prefill = measurePrefillTokensPerSec(profile, tokens);
    rows.push({
      figure: `prefill, ${tokens / 1_024}k prompt alone (TTFT ${ms(prefill.ttftMs)}, ${prefill.steps} step${prefill.steps === 1 ? "" : "s"} of ≤ 2,048)`,
      simulated: rate(prefill.tokensPerSec),
      reference: "~34k tokens/s linear (29 µs/token, LLMServingSim) + attention 1.18 ns·T(s + T/2) (reference: ps, a units slip; see profiles.ts)",
    });
  }
  rows.push({
    figure: "KV cache capacity",
    simulated: `${measureKvCapacityTokens(profile).toLocaleString("en-US")} tokens`,
    reference: "~421k tokens (26.3k blocks of 16, BLIS)",
  });
  return rows;
}
