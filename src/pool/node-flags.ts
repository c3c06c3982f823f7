/*
 * The V8 flags the pool core runs with: `npm run pool` passes them to node, and the
 * benchmarks' pool processes take them from the tree they run (so a baseline tree
 * runs with its own). Each is a measured choice; the README's issue-14 section has
 * the figures.
 *
 * --max-semi-space-size=64: a young generation of 64 MiB semi-spaces (Node 20's
 * default is 16). A call allocates tens of KiB (HTTP objects, zod's parse, undici's
 * request); with the default the pool scavenged every ~270 calls at one connection,
 * 4 ms on the main thread and 6-9 ms on V8's helper threads each, with ~2 MiB of the
 * young generation still live every time. With these it scavenged half as often
 * (13 against 26 over 7,500 calls), and used 10-23 % less CPU per call.
 */
export const POOL_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=64"];
