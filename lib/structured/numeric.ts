// Exact GBNF for integers in a range and for plain decimals between integer bounds.
// Invariant: integers are written without leading zeros, sign only when negative (no -0); bounded decimals
// are written as an integer part and an optional fraction of at most 16 digits, never with an exponent.
// Inside the bounds the grammar accepts exactly the values that satisfy them (comparisons are exact: BigInt
// integer parts, fraction zero / non-zero decided digit by digit). Unbounded magnitudes have at most
// max(16, digits of the other bound) integer digits.
import { literal, repeat } from './gbnf.js';
import { MAX_FRACTION_DIGITS, MAX_INT_DIGITS } from './json-value.js';

/** A bound on a value: the value itself allowed (inclusive) or not (exclusive). */
export interface Bound {
  value: bigint;
  exclusive: boolean;
}

const digitClass = (lo: number, hi: number) => (lo === hi ? `[${lo}]` : `[${lo}-${hi}]`);
const anyDigits = (n: number) => (n === 0 ? '' : repeat('[0-9]', n, n));
const nines = (n: number) => '9'.repeat(n);
const zeros = (n: number) => '0'.repeat(n);

/** Decimal strings of exactly a.length digits between a and b (same length, a <= b), leading zeros kept. */
function fixedRange(a: string, b: string): string {
  if (a === b) return a.length ? literal(a) : '""';
  let i = 0;
  while (a[i] === b[i]) ++i;
  const prefix = i > 0 ? `${literal(a.slice(0, i))} ` : '';
  const da = Number(a[i]), db = Number(b[i]);
  const ra = a.slice(i + 1), rb = b.slice(i + 1), n = ra.length;
  const alts: string[] = [];
  let midLo = da + 1, midHi = db - 1;
  if (ra === zeros(n)) midLo = da;
  else alts.push(`${digitClass(da, da)} ${fixedRange(ra, nines(n))}`);
  if (rb === nines(n)) midHi = db;
  if (midLo <= midHi) alts.push(`${digitClass(midLo, midHi)}${n ? ' ' + anyDigits(n) : ''}`);
  if (rb !== nines(n)) alts.push(`${digitClass(db, db)} ${fixedRange(zeros(n), rb)}`);
  return `${prefix}(${alts.join(' | ')})`;
}

/**
 * Non-negative integers in [lo, hi] (hi null: up to max(16, digits of lo) digits) as decimal text without
 * leading zeros; null when the range is empty.
 */
export function uintRange(lo: bigint, hi: bigint | null): string | null {
  if (lo < 0n) lo = 0n;
  if (hi !== null && hi < lo) return null;
  const loLen = lo.toString().length;
  const maxLen = hi === null ? Math.max(MAX_INT_DIGITS, loLen) : hi.toString().length;
  const alts: string[] = [];
  for (let len = loLen; len <= maxLen; ++len) {
    const from = len === loLen ? lo.toString() : '1' + zeros(len - 1);
    if (hi === null && len > loLen) {
      // every longer length up to maxLen at once: [1-9] [0-9]{loLen, maxLen-1}
      alts.push(`[1-9] ${repeat('[0-9]', loLen, maxLen - 1)}`);
      break;
    }
    const to = hi !== null && len === maxLen ? hi.toString() : nines(len);
    alts.push(fixedRange(from, to));
  }
  return alts.length === 1 ? alts[0] : `(${alts.join(' | ')})`;
}

/** Integers in [lo, hi] (null: unbounded on that side); null when the range is empty. */
export function integerRange(lo: bigint | null, hi: bigint | null): string | null {
  const alts: string[] = [];
  if (hi === null || hi >= 0n) {
    const pos = uintRange(lo === null || lo < 0n ? 0n : lo, hi);
    if (pos) alts.push(pos);
  }
  if (lo === null || lo < 0n) {
    // magnitudes of the negative values: [max(1, -hi), -lo]
    const mag = uintRange(hi !== null && hi < 0n ? -hi : 1n, lo === null ? null : -lo);
    if (mag) alts.push(`"-" ${mag}`);
  }
  if (alts.length === 0) return null;
  return alts.length === 1 ? alts[0] : `(${alts.join(' | ')})`;
}

const FRAC_ANY = `("." ${repeat('[0-9]', 1, MAX_FRACTION_DIGITS)})?`;
const FRAC_ZERO = `("." ${repeat('"0"', 1, MAX_FRACTION_DIGITS)})?`;
const FRAC_NONZERO = `"." ${repeat('"0"', 0, MAX_FRACTION_DIGITS - 1)} [1-9] ${repeat('[0-9]', 0, MAX_FRACTION_DIGITS - 1)}`;

/** Magnitudes m >= 0 (integer part and optional fraction) with lo <=/< m <=/< hi; null when empty. */
function magnitudeRange(lo: Bound, hi: Bound | null): string | null {
  const alts: string[] = [];
  const part = (ints: string | null, frac: string) => {
    if (ints) alts.push(`${ints} ${frac}`);
  };
  if (hi !== null && lo.value > hi.value) return null;
  if (hi !== null && lo.value === hi.value) {
    if (lo.exclusive || hi.exclusive) return null; // m = v exactly needs a zero fraction, m > v a non-zero one
    part(uintRange(lo.value, lo.value), FRAC_ZERO);
  } else {
    // integer part == lo: any fraction (inclusive) or a non-zero one (exclusive)
    if (lo.exclusive) part(uintRange(lo.value, lo.value), FRAC_NONZERO);
    const midLo = lo.exclusive ? lo.value + 1n : lo.value;
    const midHi = hi === null ? null : hi.value - 1n;
    part(midHi === null || midHi >= midLo ? uintRange(midLo, midHi) : null, FRAC_ANY);
    if (hi !== null && !hi.exclusive) part(uintRange(hi.value, hi.value), FRAC_ZERO);
  }
  if (alts.length === 0) return null;
  return alts.length === 1 ? alts[0] : `(${alts.join(' | ')})`;
}

/**
 * Plain decimals x (no exponent) with lo <=/< x <=/< hi for integer bounds (null: unbounded on that side);
 * null when no value fits.
 */
export function numberRange(lo: Bound | null, hi: Bound | null): string | null {
  const alts: string[] = [];
  // x >= 0
  if (hi === null || hi.value > 0n || (hi.value === 0n && !hi.exclusive)) {
    const from: Bound = lo === null || lo.value < 0n ? { value: 0n, exclusive: false } : lo;
    const m = magnitudeRange(from, hi);
    if (m) alts.push(m);
  }
  // x < 0, written "-" m with m > 0
  if (lo === null || lo.value < 0n) {
    const from: Bound = hi !== null && hi.value < 0n ? { value: -hi.value, exclusive: hi.exclusive } : { value: 0n, exclusive: true };
    const to: Bound | null = lo === null ? null : { value: -lo.value, exclusive: lo.exclusive };
    const m = magnitudeRange(from, to);
    if (m) alts.push(`"-" ${m}`);
  }
  if (alts.length === 0) return null;
  return alts.length === 1 ? alts[0] : `(${alts.join(' | ')})`;
}
