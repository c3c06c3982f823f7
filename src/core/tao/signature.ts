/*
 * Signature of what a plan was computed from, so a caller can tell cheaply whether
 * live state still matches: engines' free quanta, and per program its quanta, call
 * state, readiness, cache engine and credit magnitude (log2 bucket: credit decays
 * continuously, but a plan goes stale only when it changes by a factor).
 */

import { cacheEngineIndex, capacityUnits, creditTokens, demandUnits, type TaoSnapshot } from "./snapshot.js";

/** cyrb53: a fast 53-bit string hash (not cryptographic: change detection only). */
export function hash53(text: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(14, "0");
}

export function snapshotSignature(snapshot: TaoSnapshot, quantumTokens: number): string {
  const parts: string[] = [`q=${quantumTokens}`];
  for (const engine of snapshot.engines) parts.push(`e:${engine.engineId}=${capacityUnits(engine.freeTokens, quantumTokens)}`);
  for (const program of snapshot.programs) {
    const cache = cacheEngineIndex(program, snapshot.engines);
    const cacheId = cache < 0 ? "" : (snapshot.engines[cache]?.engineId ?? "");
    const magnitude = cache < 0 ? 0 : Math.floor(Math.log2(1 + creditTokens(program, cacheId)));
    parts.push(`p:${program.programId}=${demandUnits(program.tokens, quantumTokens)},${program.queued ? 1 : 0},${program.ready ? 1 : 0},${cacheId},${magnitude}`);
  }
  return hash53(parts.join("\n"));
}
