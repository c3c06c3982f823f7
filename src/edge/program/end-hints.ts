import type { KvHint, ProgramEndReason } from "../../protocol/kv-hints.js";
import type { ThreadEndOutcome } from "../../protocol/threads.js";
import { sendKvHintsToPool } from "../chat/pool-client.js";
import { edgeConfig, type Env } from "../env.js";
import { poolSnapshot } from "../pools/directory-cache.js";
import { programPool } from "../pools/routing.js";

export interface EndedProgram {
  tenantId: string;
  programId: string;
  reason: ProgramEndReason;
  /** The pools whose engines served it (its KV is there). */
  pools: readonly string[];
}

export interface EndedThread {
  tenantId: string;
  programId: string;
  thread: string;
  /** Its context generation when it ended. */
  generation: number;
  outcome: ThreadEndOutcome;
  /** The pools whose engines served it (its context's KV is there). */
  pools: readonly string[];
}

/** Where the hints go and what they are about, for the log. */
interface HintTarget {
  tenantId: string;
  programId: string;
  pools: readonly string[];
  /** "the end of prog_…", "the end of thread t of prog_…". */
  what: string;
}

/**
 * Tells each pool that served a program that it is over (`program_ended`), so their
 * engines can evict its KV first. Never rejects (sendKvHints). `background` keeps a
 * snapshot refresh alive (ctx.waitUntil).
 */
export function sendProgramEndedHints(env: Env, ended: EndedProgram, background: (work: Promise<unknown>) => void): Promise<void> {
  return sendKvHints(env, { ...ended, what: `the end of ${ended.programId}` }, [{ type: "program_ended", reason: ended.reason }], background);
}

/** Tells each pool that served a thread that the agent ended it (`thread_ended`): its context may go first. Never rejects. */
export function sendThreadEndedHints(env: Env, ended: EndedThread, background: (work: Promise<unknown>) => void): Promise<void> {
  const hint: KvHint = { type: "thread_ended", thread: ended.thread, generation: ended.generation, outcome: ended.outcome };
  return sendKvHints(env, { ...ended, what: `the end of thread ${ended.thread} of ${ended.programId}` }, [hint], background);
}

/**
 * Sends one signed hint batch to each pool of `target`. Hints: a pool that is gone from
 * the directory, cannot be reached or refuses is logged and skipped; this never rejects.
 */
async function sendKvHints(env: Env, target: HintTarget, hints: KvHint[], background: (work: Promise<unknown>) => void): Promise<void> {
  if (target.pools.length === 0) return;
  try {
    const snapshot = await poolSnapshot(env, background);
    const config = edgeConfig(env);
    await Promise.all(
      target.pools.map(async (poolId) => {
        const pool = programPool(snapshot, config, poolId);
        if (pool === undefined) return;
        await sendKvHintsToPool({ poolUrl: pool.url, signingKey: pool.signingKey }, target, { hints }, Date.now()).catch((error: unknown) =>
          console.error(`${target.what} did not reach pool ${poolId}`, error),
        );
      }),
    );
  } catch (error) {
    console.error(`${target.what} was not sent to its pools`, error);
  }
}
