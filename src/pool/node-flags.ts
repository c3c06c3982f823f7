/*
 * The V8 flags the pool core runs with: `npm run pool` passes them to node, and the
 * benchmarks' pool processes take them from the tree they run (so a baseline tree
 * runs with its own). Each is a measured choice; the README's issue-14 section has
 * the figures.
 *
 * --max-semi-space-size=64: a young generation of 64 MiB semi-spaces (Node 20's
 * default is 16). A call allocates tens of KiB (HTTP objects, zod's parse, undici's
 * request), so the default scavenged every few hundred calls, and each scavenge
 * also copied the calls in flight and the pool's young bookkeeping. Four times the
 * room scavenges a quarter as often.
 */
export const POOL_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=64"];
