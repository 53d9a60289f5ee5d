// Seeded pseudo-random numbers for the benchmark client (prompts, lengths, Poisson arrivals).
// Invariant: one generator per purpose, each seeded from (--seed, purpose), so the prompts do not change
// when the request rate does; no Math.random anywhere.

export interface Rng {
  /** uniform in [0, 1) */
  next(): number;
  /** uniform integer in [lo, hi], both inclusive */
  int(lo: number, hi: number): number;
  /** exponential with the given rate (mean 1 / rate) */
  exponential(rate: number): number;
}

/** 32-bit FNV-1a, to turn a purpose name into a seed offset. */
function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** mulberry32 seeded with (seed, purpose). */
export function createRng(seed: number, purpose: string): Rng {
  let state = (seed ^ fnv1a32(purpose)) >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) | 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    exponential: (rate) => -Math.log(1 - next()) / rate,
  };
}
