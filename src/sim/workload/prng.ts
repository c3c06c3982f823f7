/*
 * A small seeded PRNG so generated workloads are reproducible everywhere (pure: no
 * Math.random). xoshiro128** (Blackman & Vigna) has a 2^128 − 1 period and passes
 * BigCrush; splitmix32 expands one 32-bit seed into its four words, which also
 * makes derived streams (one per program) independent of one another.
 */
import { mix32 } from "../token-hash.js";

/** Expands `seed` into a stream of well-mixed 32-bit words. */
function splitmix32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e37_79b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x21f0_aaad);
    z = Math.imul(z ^ (z >>> 15), 0x735a_2d97);
    return (z ^ (z >>> 15)) >>> 0;
  };
}

/** A 32-bit hash of a string (FNV-1a, finalised). */
export function hashString(text: string): number {
  let h = 0x811c_9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x0100_0193);
  return mix32(h);
}

/** Folds several integers into one 32-bit seed (for per-program streams). */
export function deriveSeed(...parts: readonly number[]): number {
  let h = 0x811c_9dc5;
  for (const part of parts) {
    const next = splitmix32(h ^ (part >>> 0));
    h = next() ^ Math.imul(Math.floor(part / 2 ** 32) | 0, 0x0100_0193);
  }
  return splitmix32(h)() >>> 0;
}

export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    const next = splitmix32(seed);
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
  }

  /** A uniform 32-bit unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.b, 5), 7), 9) >>> 0;
    const t = this.b << 9;
    this.c ^= this.a;
    this.d ^= this.b;
    this.b ^= this.c;
    this.a ^= this.d;
    this.c ^= t;
    this.d = rotl(this.d, 11);
    return result;
  }

  /** Uniform in [0, 1) with 32 bits of resolution. */
  next(): number {
    return this.nextUint32() / 2 ** 32;
  }

  /** Uniform in (0, 1]: safe under Math.log. */
  nextOpen(): number {
    return (this.nextUint32() + 1) / 2 ** 32;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
