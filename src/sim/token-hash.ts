/*
 * Chained block hashes for the prefix cache, as vLLM keys it: a block's hash covers
 * its parent's hash and its own tokens, so equal hashes mean equal prefixes. Two
 * independent 32-bit lanes are folded into one 53-bit integer so hashes are plain
 * numbers (fast Map keys); a collision needs ~10^8 live blocks to become likely.
 */

const TWO_POW_21 = 2 ** 21;
/** Marks a token boundary; outside the UTF-16 range so it cannot equal a character. */
const TOKEN_END = 0x1_0000;
/** Tags generated tokens (vocabulary indices) apart from prompt characters. */
const GENERATED_TAG = 0x2_0000;

/** Murmur3's 32-bit finaliser: spreads every input bit over the output. */
export function mix32(h: number): number {
  let x = h | 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85eb_ca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2_ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** Incremental two-lane hasher; one instance is reused so hashing allocates nothing. */
export class BlockHasher {
  private a = 0;
  private b = 0;

  /** Starts a block whose parent has hash `parent` (0 for the first block). */
  start(parent: number): this {
    const high = Math.floor(parent / TWO_POW_21);
    const low = parent - high * TWO_POW_21;
    this.a = mix32(high ^ 0x811c_9dc5);
    this.b = mix32(low ^ 0x9747_b28c);
    return this;
  }

  private unit(value: number): void {
    this.a = Math.imul(this.a ^ value, 0x0100_0193);
    this.b = Math.imul(this.b ^ value, 0x5bd1_e995);
    this.b ^= this.b >>> 15;
  }

  /** A prompt token (a short string). */
  addText(token: string): this {
    // Same as unit() per character, with the lanes kept in locals (hot path).
    let a = this.a;
    let b = this.b;
    for (let i = 0; i < token.length; i++) {
      const c = token.charCodeAt(i);
      a = Math.imul(a ^ c, 0x0100_0193);
      b = Math.imul(b ^ c, 0x5bd1_e995);
      b ^= b >>> 15;
    }
    this.a = a;
    this.b = b;
    this.unit(TOKEN_END);
    return this;
  }

  /** A generated token, identified by its vocabulary index. */
  addGenerated(vocabularyIndex: number): this {
    this.unit(GENERATED_TAG + vocabularyIndex);
    return this;
  }

  addNumber(value: number): this {
    this.unit(value | 0);
    this.unit(Math.floor(value / 2 ** 32) | 0);
    return this;
  }

  /** The 53-bit hash of everything added since `start`. */
  finish(): number {
    return mix32(this.a) * TWO_POW_21 + (mix32(this.b ^ 0x5f35_6495) >>> 11);
  }
}

const sharedHasher = new BlockHasher();

/**
 * Hashes of the full blocks of `tokens` (a trailing partial block has none). When
 * the caller already holds the hashes of a prefix of the same tokens (an agent's
 * previous call), pass them as `known` and only the new blocks are hashed.
 */
export function promptBlockHashes(
  tokens: readonly string[],
  blockSize: number,
  known: readonly number[] = [],
): number[] {
  const fullBlocks = Math.floor(tokens.length / blockSize);
  const hashes = known.slice(0, fullBlocks);
  let parent = hashes.length > 0 ? (hashes[hashes.length - 1] ?? 0) : 0;
  for (let k = hashes.length; k < fullBlocks; k++) {
    sharedHasher.start(parent);
    const end = (k + 1) * blockSize;
    for (let i = k * blockSize; i < end; i++) sharedHasher.addText(tokens[i] ?? "");
    parent = sharedHasher.finish();
    hashes.push(parent);
  }
  return hashes;
}

/**
 * A 32-bit fingerprint of the whole prompt: the last full block's hash (which covers
 * everything before it), the trailing tokens and the length.
 */
export function promptSeed(tokens: readonly string[], blockSize: number, blockHashes: readonly number[]): number {
  const lastHash = blockHashes.length > 0 ? (blockHashes[blockHashes.length - 1] ?? 0) : 0;
  sharedHasher.start(lastHash).addNumber(tokens.length);
  for (let i = blockHashes.length * blockSize; i < tokens.length; i++) sharedHasher.addText(tokens[i] ?? "");
  return mix32(Math.floor(sharedHasher.finish() / TWO_POW_21));
}
