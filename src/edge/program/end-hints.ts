import type { ProgramEndReason } from "../../protocol/kv-hints.js";
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

/**
 * Tells each pool that served a program that it is over (`program_ended`), so their
 * engines can evict its KV first. Hints: a pool that is gone from the directory, cannot
 * be reached or refuses is logged and skipped; this never rejects. `background` keeps a
 * snapshot refresh alive (ctx.waitUntil).
 */
export async function sendProgramEndedHints(env: Env, ended: EndedProgram, background: (work: Promise<unknown>) => void): Promise<void> {
  if (ended.pools.length === 0) return;
  try {
    const snapshot = await poolSnapshot(env, background);
    const config = edgeConfig(env);
    await Promise.all(
      ended.pools.map(async (poolId) => {
        const pool = programPool(snapshot, config, poolId);
        if (pool === undefined) return;
        await sendKvHintsToPool(
          { poolUrl: pool.url, signingKey: pool.signingKey },
          ended,
          { hints: [{ type: "program_ended", reason: ended.reason }] },
          Date.now(),
        ).catch((error: unknown) => console.error(`the end of ${ended.programId} did not reach pool ${poolId}`, error));
      }),
    );
  } catch (error) {
    console.error(`the end of ${ended.programId} was not sent to its pools`, error);
  }
}
