import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import type OpenAI from "openai";
import { z } from "zod";
import { freePort } from "../../src/cli/free-port.js";
import { type LocalStack, type LocalStackOptions, startLocalStack } from "../../src/cli/local-stack.js";
import type { EngineRequestObserver } from "../../src/sim/engine-server.js";
import { runWrangler } from "../../src/cli/wrangler-process.js";

/* What the end-to-end tests do against a running local stack: admin calls, tenants, the local D1, polling. */

export const root = path.resolve(import.meta.dirname, "../..");

/** A streamed chat completion read to its end: the text of its deltas and the usage chunk, if one came. */
export async function readChatStream(
  chunks: AsyncIterable<OpenAI.ChatCompletionChunk>,
): Promise<{ text: string; usage: OpenAI.CompletionUsage | undefined }> {
  let text = "";
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of chunks) {
    text += chunk.choices[0]?.delta.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  return { text, usage };
}

/** One admin API call; a non-2xx answer throws with its body. */
export async function adminCall(stack: LocalStack, method: string, route: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${stack.edgeUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json: unknown = await res.json();
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** A tenant on the pro plan with `overrides`, and a fresh key of it. */
export async function createTenant(
  stack: LocalStack,
  name: string,
  overrides?: Record<string, unknown>,
): Promise<{ id: string; key: string }> {
  const tenant = z.object({ id: z.string() }).parse(await adminCall(stack, "POST", "/admin/tenants", { name, plan: "pro" }));
  if (overrides) await adminCall(stack, "PATCH", `/admin/tenants/${tenant.id}/overrides`, overrides);
  const { key } = z.object({ key: z.string() }).parse(await adminCall(stack, "POST", `/admin/tenants/${tenant.id}/keys`, {}));
  return { id: tenant.id, key };
}

/** A program's usage rows, read from the local D1 the Worker writes to, through wrangler itself. */
export async function localUsageRows<T extends z.ZodRawShape>(
  stateDir: string,
  programId: string,
  row: z.ZodObject<T>,
): Promise<z.infer<z.ZodObject<T>>[]> {
  const columns = Object.keys(row.shape).join(", ");
  const out = await runWrangler(
    [
      "d1",
      "execute",
      "agentix",
      "--local",
      "--persist-to",
      path.join(stateDir, "wrangler"),
      "--json",
      "--command",
      `SELECT ${columns} FROM usage WHERE program_id = '${programId}' ORDER BY started_at`,
    ],
    { cwd: root, env: { CI: "true" } },
  );
  const parsed = z.array(z.object({ results: z.array(row) })).parse(JSON.parse(out.slice(out.indexOf("["))));
  return parsed[0]?.results ?? [];
}

/**
 * Polls `probe` until `done` says so or `timeoutMs` passed; returns the last value
 * either way. A probe that throws is asked again until the time is up (then the error
 * is thrown): wrangler's local proxy sometimes closes a kept-alive connection just as
 * the client reuses it.
 */
export async function waitFor<T>(probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000, intervalMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const value = await answeredWithin(probe(), Math.min(PROBE_MAX_MS, Math.max(0, deadline - Date.now()) + PROBE_GRACE_MS));
      if (done(value) || Date.now() > deadline) return value;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** How long past waitFor's deadline one probe may take (a `wrangler d1 execute` takes seconds on a loaded machine). */
const PROBE_GRACE_MS = 15_000;
/**
 * Longest one probe may take before it counts as failed and is asked again, so a request the
 * local runtime leaves hanging fails the wait with a reason instead of the test's timeout.
 */
const PROBE_MAX_MS = 15_000;

/** A probe that never answers (a request the local runtime left hanging) fails the wait with a reason instead of running into the test's timeout. */
async function answeredWithin<T>(answer: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`waitFor: a probe did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Generation requests open at a stack's engines right now, and the most seen at once. */
export interface EngineCounts {
  open: number;
  peak: number;
}

/** An engine observer that keeps `counts` (every engine of every pool reports to it). */
export function countEngineRequests(counts: EngineCounts): EngineRequestObserver {
  return {
    opened() {
      counts.open++;
      counts.peak = Math.max(counts.peak, counts.open);
    },
    closed() {
      counts.open--;
    },
  };
}

/**
 * The edge's LEDGER_FLUSH_MS under test: rows still reach D1 in batches, by the ledger's
 * alarm, but within half a second instead of the deployed 5 s, so tests that wait for
 * usage rows wait less.
 */
export const TEST_LEDGER_FLUSH_MS = 500;

/** Pools listen on any free port (a fixed base would collide with another file's stack, since pools take consecutive ports). */
export type TestStackOptions = Omit<LocalStackOptions, "root" | "stateDir" | "edgePort" | "poolPort">;

export interface LocalStackHandle {
  readonly stack: LocalStack;
  readonly stateDir: string;
}

/**
 * Starts a local stack before the file's tests (a fresh state directory, free ports)
 * and stops it and removes its state after them. Read `stack` and `stateDir` inside tests.
 */
export function useLocalStack(name: string, options: TestStackOptions): LocalStackHandle {
  let started: { stack: LocalStack; stateDir: string } | undefined;
  let stateDir: string | undefined;
  beforeAll(async () => {
    stateDir = await mkdtemp(path.join(tmpdir(), `agentix-e2e-${name}-`));
    const stack = await startLocalStack({
      root,
      stateDir,
      edgePort: await freePort(),
      poolPort: 0,
      ...options,
      edgeVars: { LEDGER_FLUSH_MS: String(TEST_LEDGER_FLUSH_MS), ...options.edgeVars },
    });
    started = { stack, stateDir };
  }, 120_000);
  afterAll(async () => {
    await started?.stack.stop();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });
  const get = () => {
    if (!started) throw new Error("the local stack has not started");
    return started;
  };
  return {
    get stack() {
      return get().stack;
    },
    get stateDir() {
      return get().stateDir;
    },
  };
}
