// Shared by the structured-output compiler tests: whether a GBNF grammar accepts a whole text (the engine's own
// matcher, a test-only addon export), a TAP-safe label, and a seeded PRNG (mulberry32) so failures reproduce.
import { debugAddon } from './debug-addon.js';

/** The addon with its test hooks (grammarCheck, grammarMatch). */
export const native = debugAddon();

/** The text is a whole sentence of the grammar. */
export function complete(gbnf: string, text: string): boolean {
  return native.grammarMatch(gbnf, text).complete;
}

/** A test label with everything outside printable ASCII escaped (U+2028 would break TAP lines). */
export const show = (v: unknown): string =>
  String(JSON.stringify(v)).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

export type Rand = () => number;

export function rng(seed: number): Rand {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

export const int = (r: Rand, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));
export const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
