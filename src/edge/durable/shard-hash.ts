/**
 * FNV-1a, 32 bits: which of a tenant's sharded objects a random ID goes to (a call's
 * limiter shard, a program's ledger shard). Not a security property: the IDs are random.
 */
export function shardHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
