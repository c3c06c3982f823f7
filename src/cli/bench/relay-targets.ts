import { Pool } from "undici";
import { newProgramId, newTenantId } from "../../protocol/ids.js";
import { POOL_PATHS, type SigningKey } from "../../protocol/signing.js";
import type { RelayTargetName } from "./relay-options.js";
import { SignedRequestStock } from "./proxy-signed-requests.js";
import { CHAT_PATH } from "./proxy-targets.js";

/*
 * The two ways a stream reaches the token source in the relay benchmark: directly
 * (the baseline) and through the pool core, with calls signed as the edge signs them.
 * Each target has its own client connection pool, sized for the largest level and
 * kept alive across levels, so a level measures relaying, not TCP set-up.
 */

export interface RelayTarget {
  name: RelayTargetName;
  label: string;
  description: string;
  dispatcher: Pool;
  path: string;
  headers: Record<string, string>;
  /** Per-stream headers for `streams` streams of this body, made before the level starts. */
  prepare(streams: number, body: string): Promise<() => Record<string, string>>;
}

export const RELAY_TARGET_LABELS: Record<RelayTargetName, string> = {
  engine: "engine",
  "pool-baseline": "pool0",
  pool: "pool",
};

/** Rows and runs in this order: the baseline pool beside (before) the pool. */
export const RELAY_TARGET_ORDER: readonly RelayTargetName[] = ["engine", "pool-baseline", "pool"];

/** The key of a pool target's CPU (and `…Wait`) in a level's figures; undefined for the engine. */
export function poolCpuKey(target: RelayTargetName): string | undefined {
  return target === "pool" ? "pool" : target === "pool-baseline" ? "pool0" : undefined;
}

const JSON_HEADERS = { "content-type": "application/json" };

/** Longer than the idle gap between two levels of one target (the other target's level, ~5 s). */
const CLIENT_KEEP_ALIVE_MS = 120_000;

function clientPool(origin: string, connections: number): Pool {
  return new Pool(origin, {
    connections,
    pipelining: 1,
    keepAliveTimeout: CLIENT_KEEP_ALIVE_MS,
    keepAliveMaxTimeout: CLIENT_KEEP_ALIVE_MS,
    // A saturated pool accepts 2,000 connections slowly (undici's default, 10 s, timed out in the warm-up).
    connect: { timeout: 60_000 },
    headersTimeout: 60_000,
    // A stream silent this long is broken (tokens come every interval).
    bodyTimeout: 30_000,
  });
}

export function directTarget(source: { url: string }, connections: number): RelayTarget {
  return {
    name: "engine",
    label: RELAY_TARGET_LABELS.engine,
    description: "paced token source, direct",
    dispatcher: clientPool(source.url, connections),
    path: CHAT_PATH,
    headers: JSON_HEADERS,
    prepare: async () => () => ({}),
  };
}

export function poolRelayTarget(
  pool: { url: string },
  signingKey: SigningKey,
  connections: number,
  name: "pool" | "pool-baseline" = "pool",
): RelayTarget {
  const tenant = newTenantId();
  return {
    name,
    label: RELAY_TARGET_LABELS[name],
    description: `pool core${name === "pool-baseline" ? " of the baseline tree" : ""} → token source (openai engine kind), calls signed as the edge signs them`,
    dispatcher: clientPool(pool.url, connections),
    path: POOL_PATHS.chatCompletions,
    headers: JSON_HEADERS,
    async prepare(streams, body) {
      // One program per stream: each is one agent's call.
      const programs = Array.from({ length: streams }, newProgramId);
      const stock = new SignedRequestStock(signingKey, body, { tenant, programs, thread: "main" });
      await stock.fill(streams);
      return () => stock.take();
    },
  };
}
