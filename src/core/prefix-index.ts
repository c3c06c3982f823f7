/*
 * The cache-aware router's picture of each engine's prefix cache, as SGLang's router
 * keeps it: not the engine's real cache (a router cannot see it) but an approximate
 * radix tree per engine of the prompts the router sent there, trimmed least recently
 * used first once it passes a size cap. It over-estimates what the engine holds (the
 * engine evicts under load; the tree only at its cap), which is the router's real
 * weakness and is kept on purpose.
 *
 * Prompts are given as chained block hashes: hash k covers tokens [0, (k + 1) · block)
 * (src/sim/token-hash.ts, vLLM's prefix-cache keys), so equal hashes mean equal
 * prefixes. A radix tree over whole blocks is then a set of hashes, and a prompt's
 * match on an engine is its longest run of leading hashes in that set. SGLang's tree
 * works on characters; whole blocks lose less than one block per match.
 *
 * Eviction order: inserting touches a prompt's blocks from the deepest to the first,
 * so a prefix is always more recent than its extensions and a tree loses leaves
 * before the inner nodes that other prompts share. Trimming is batched (down to 7/8
 * of the cap at a time), as SGLang's router trims its trees periodically.
 */

export interface RoutedPrefixSettings {
  /** Blocks kept per engine before the least recently used are dropped. */
  maxBlocksPerEngine: number;
}

/**
 * 2^20 blocks of 16 tokens (~16.8M tokens) per engine: SGLang's router caps each
 * tree at 2^26 characters (max_tree_size), about 2^24 tokens at 4 characters per
 * token. Far above an engine's real KV (Llama-3.1-8B on an H100: ~421k tokens).
 */
export const DEFAULT_ROUTED_PREFIX_SETTINGS: RoutedPrefixSettings = Object.freeze({ maxBlocksPerEngine: 1 << 20 });

export function validateRoutedPrefixSettings(settings: RoutedPrefixSettings): void {
  if (!Number.isInteger(settings.maxBlocksPerEngine) || settings.maxBlocksPerEngine < 1) {
    throw new RangeError(`maxBlocksPerEngine must be an integer >= 1, got ${settings.maxBlocksPerEngine}`);
  }
}

export class RoutedPrefixIndex {
  readonly settings: Readonly<RoutedPrefixSettings>;
  /** engineId -> block hash -> when it was last touched (a counter). */
  readonly #trees = new Map<string, Map<number, number>>();
  #clock = 0;

  constructor(settings: RoutedPrefixSettings = DEFAULT_ROUTED_PREFIX_SETTINGS) {
    validateRoutedPrefixSettings(settings);
    this.settings = Object.freeze({ ...settings });
  }

  /** Leading blocks of the prompt the engine's tree holds. O(matched blocks). */
  matchBlocks(engineId: string, blockHashes: readonly number[]): number {
    const tree = this.#trees.get(engineId);
    if (tree === undefined) return 0;
    let matched = 0;
    while (matched < blockHashes.length && tree.has(blockHashes[matched] as number)) matched++;
    return matched;
  }

  /**
   * The router sent this prompt to the engine. O(blocks); past the cap, the least
   * recently touched blocks go down to 7/8 of it (O(tree log tree), amortised over
   * the cap / 8 blocks inserted before the next trim, like SGLang's periodic eviction).
   */
  insert(engineId: string, blockHashes: readonly number[]): void {
    let tree = this.#trees.get(engineId);
    if (tree === undefined) {
      tree = new Map();
      this.#trees.set(engineId, tree);
    }
    for (let k = blockHashes.length - 1; k >= 0; k--) tree.set(blockHashes[k] as number, ++this.#clock);
    const cap = this.settings.maxBlocksPerEngine;
    if (tree.size <= cap) return;
    const keep = Math.max(1, Math.floor((cap * 7) / 8));
    const byAge = [...tree].sort((a, b) => a[1] - b[1]);
    for (let i = 0; i < byAge.length - keep; i++) tree.delete((byAge[i] as [number, number])[0]);
  }

  /** Blocks in the engine's tree (SGLang sends a cache miss to the smallest tree). */
  blocks(engineId: string): number {
    return this.#trees.get(engineId)?.size ?? 0;
  }

  /** The engine was replaced or restarted: its tree is gone. */
  forgetEngine(engineId: string): void {
    this.#trees.delete(engineId);
  }
}
