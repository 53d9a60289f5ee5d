// make_qkx2_quants(32, 15, x, w, L, &min, Laux, -1, 0.1, 20, false) of ggml-quants.c (the Q4_K sub-block
// scale/min search), exact and fast.
// Invariant: L, the scale and the min are bit-identical to ggml's. ggml tries 21 iscales, each time fitting
// scale and min to the levels by weighted least squares (float32) and keeping the fit with the smallest
// error. Here levels are tracked per value only near the steps where they change (they are monotone in the
// step; a win moves min and restarts the tracking), sums are kept in double, and a step is evaluated in
// float32 (ggml's exact order) unless the double least-squares minimum of its levels, lowered by a proven
// bound on float32 rounding, is already above the best error: a step can only win when this test says so.
// The bounds assume float32 sums and products of normal size: a sub-block of tiny values (every |x| < 2^-30,
// where they may round into float32's subnormal range, and ggml's iscales may overflow to infinity) goes to
// the plain port of ggml's loops (search-q4k-ref.ts), which test/quant-search.test.ts holds this search to.
import { makeQkx2QuantsRef } from './search-q4k-ref.js';

const N = 32; // values per sub-block
const NMAX = 15; // levels 0..15
const STEPS = 21; // is = 0..20, iscale = (-1 + 0.1 * is + 15) / (max - min)
const TENTH = Math.fround(0.1); // 0.1f
const ROUND_F64 = 6755399441055744; // 1.5 * 2^52: (v + ROUND_F64) - ROUND_F64 rounds v to an integer, ties to even
const U = 2 ** -24; // float32 unit roundoff
const TINY = 2 ** -149; // float32's smallest subnormal: a rounding into the subnormal range errs by <= TINY / 2
const SMALL = 2 ** -30; // sub-blocks whose largest |x| is below this go to the plain port
const WELL_CONDITIONED = 0.1; // the filter runs when D >= 0.1 * sum_w * sum_l2 (float32 D is then within 1e-4)

// Scratch (module-level, no reentrancy; doubles live in typed arrays, as V8 boxes doubles in module `let`s).
const xs = new Float64Array(N); // values (float32)
const ws = new Float64Array(N); // weights (float32)
const xm = new Float64Array(N); // fl(x - min) for the current min
const iscales = new Float64Array(STEPS);
const cur = new Int8Array(N); // levels at the step being judged
const bucketLen = new Uint8Array(STEPS); // level changes at step k: value index and new level
const bucketI = new Uint8Array(STEPS * N);
const bucketL = new Int8Array(STEPS * N);
const st = new Float64Array(15);
// double sums of the current levels; double constants of the sub-block; ggml's float32 sum_w and sum_x;
// ggml's search state
const SUM_L = 0, SUM_L2 = 1, SUM_XL = 2, SW = 3, SX = 4, SXX = 5, SABSX = 6, MAXABS = 7;
const SUM_W_F = 8, SUM_X_F = 9, BEST_ERR = 10, SCALE = 11, MIN = 12, MAX = 13, RANGE = 14;

function levelAt(k: number, i: number): number {
  const l = Math.fround(iscales[k] * xm[i]) + ROUND_F64 - ROUND_F64;
  return l < 0 ? 0 : l > NMAX ? NMAX : l;
}

/**
 * Sets cur to the levels of step `from` (for the current min and range), records where each level changes
 * up to step 20 (iscale * xm moves by at most 0.1 per step, so one level at a time; each change is located
 * by interpolation and confirmed by direct evaluation) and recomputes the double sums.
 */
function track(from: number): void {
  const range = st[RANGE];
  for (let k = from; k < STEPS; k++) iscales[k] = Math.fround(Math.fround(Math.fround(-1 + Math.fround(TENTH * k)) + NMAX) / range);
  for (let k = from; k < STEPS; k++) bucketLen[k] = 0;
  let sL = 0, sL2 = 0, sXL = 0;
  for (let i = 0; i < N; i++) {
    const l0 = levelAt(from, i);
    const l1 = levelAt(STEPS - 1, i);
    cur[i] = l0;
    sL += ws[i] * l0;
    sL2 += ws[i] * l0 * l0;
    sXL += ws[i] * l0 * xs[i];
    if (l0 === l1 || !(Math.abs(l1 - l0) <= NMAX)) continue; // (NaN levels cannot happen: range > 0)
    const dir = l1 > l0 ? 1 : -1;
    const p0 = Math.fround(iscales[from] * xm[i]);
    const stepsPerUnit = (STEPS - 1 - from) / (Math.fround(iscales[STEPS - 1] * xm[i]) - p0);
    let a = from; // level(a) == level
    for (let level = l0; level !== l1; level += dir) {
      let k = from + Math.ceil((level + 0.5 * dir - p0) * stepsPerUnit);
      k = k <= a ? a + 1 : k > STEPS - 1 ? STEPS - 1 : k;
      while (levelAt(k, i) === level) k++; // level(20) == l1 != level, so this stops
      while (k - 1 > a && levelAt(k - 1, i) !== level) k--;
      const b = bucketLen[k]++;
      bucketI[k * N + b] = i;
      bucketL[k * N + b] = level + dir;
      a = k;
    }
  }
  st[SUM_L] = sL;
  st[SUM_L2] = sL2;
  st[SUM_XL] = sXL;
}

/** Applies the level changes of step k to cur and the double sums; returns how many levels changed. */
function applyStep(k: number): number {
  const n = bucketLen[k];
  let dL = 0, dL2 = 0, dXL = 0;
  for (let b = 0; b < n; b++) {
    const i = bucketI[k * N + b];
    const l = bucketL[k * N + b];
    const old = cur[i];
    cur[i] = l;
    dL += ws[i] * (l - old);
    dL2 += ws[i] * (l * l - old * old);
    dXL += ws[i] * (l - old) * xs[i];
  }
  st[SUM_L] += dL;
  st[SUM_L2] += dL2;
  st[SUM_XL] += dXL;
  return n;
}

/**
 * True when ggml's float32 error for the levels in cur is provably >= the best error, so the step cannot
 * win. E* (the exact weighted least-squares minimum over scale and min) bounds every fit's error from below;
 * the float32 evaluation of a fit (scale s, min m) differs from its exact error E by at most
 * 34u E + 6.2u M sqrt(sum_w E) + 10u^2 M^2 sum_w, where M bounds |x| + |m| + 15 |s| (each of the three
 * roundings in fl(fl(s l + m) - x) errs by at most u times a term <= M, and Cauchy-Schwarz gives
 * sum w |diff| <= sqrt(sum_w E)); that lower bound grows with E, so it holds at E*. With |x| >= 2^-30 the
 * scale and min sums stay normal; the error terms may still underflow, each rounding of diff * diff (scaled
 * by w <= 2 max|x|), w * diff^2 and the running sum then erring by up to TINY / 2 absolute.
 */
function cannotWin(): boolean {
  const A = st[SUM_L], B = st[SUM_L2], C = st[SUM_XL], sw = st[SW], sx = st[SX], sabsx = st[SABSX], maxAbs = st[MAXABS];
  const dd = sw * B - A * A;
  if (!(dd >= WELL_CONDITIONED * sw * B && dd > 0)) return false;
  const numS = sw * C - sx * A;
  const numM = B * sx - A * C;
  const s = numS / dd, m = numM / dd;
  const cAbs = maxAbs * A; // >= sum w l |x|
  const eStar = st[SXX] - s * C - m * sx - 1e-12 * (st[SXX] + Math.abs(s) * (Math.abs(C) + cAbs) + Math.abs(m) * (Math.abs(sx) + maxAbs * sw));
  // float32 scale and min: numerators err by <= 70u of their terms' sizes, D by < 1% when well conditioned
  const sBound = Math.max((Math.abs(numS) + 70 * U * (sw * cAbs + sabsx * A)) / (0.99 * dd), (1.01 * cAbs) / B);
  const mBound = (Math.abs(numM) + 70 * U * (B * sabsx + A * cAbs)) / (0.99 * dd);
  const M = maxAbs + mBound + NMAX * sBound;
  const floor = 10 * U * U * M * M * sw;
  if (!(eStar >= floor)) return false;
  const underflow = N * (2 * maxAbs + 2) * TINY;
  return eStar * (1 - 34 * U) - 6.2 * U * M * Math.sqrt(sw * eStar) - floor - underflow > st[BEST_ERR];
}

/** Sets min (and what depends on it: range, xm) as ggml does after a winning step. */
function setMin(min: number): void {
  st[MIN] = min;
  st[RANGE] = Math.fround(st[MAX] - min);
  for (let i = 0; i < N; i++) xm[i] = Math.fround(xs[i] - min);
}

/** One step of ggml's search on the levels in cur, in float32 exactly as ggml; true when it wins. */
function judge(L: Uint8Array, off: number): boolean {
  if (cannotWin()) return false;
  let sumL = 0, sumL2 = 0, sumXL = 0;
  for (let i = 0; i < N; i++) {
    const l = cur[i];
    const wl = Math.fround(ws[i] * l);
    sumL = Math.fround(sumL + wl);
    sumL2 = Math.fround(sumL2 + Math.fround(wl * l));
    sumXL = Math.fround(sumXL + Math.fround(wl * xs[i]));
  }
  const sumW = st[SUM_W_F], sumX = st[SUM_X_F];
  const D = Math.fround(Math.fround(sumW * sumL2) - Math.fround(sumL * sumL));
  if (!(D > 0)) return false;
  let scale = Math.fround(Math.fround(Math.fround(sumW * sumXL) - Math.fround(sumX * sumL)) / D);
  let min = Math.fround(Math.fround(Math.fround(sumL2 * sumX) - Math.fround(sumL * sumXL)) / D);
  if (min > 0) {
    min = 0;
    scale = Math.fround(sumXL / sumL2);
  }
  let err = 0;
  for (let i = 0; i < N; i++) {
    const diff = Math.fround(Math.fround(Math.fround(scale * cur[i]) + min) - xs[i]);
    err = Math.fround(err + Math.fround(ws[i] * Math.fround(diff * diff)));
  }
  if (!(err < st[BEST_ERR])) return false;
  for (let i = 0; i < N; i++) L[off + i] = cur[i];
  st[BEST_ERR] = err;
  st[SCALE] = scale;
  setMin(min);
  return true;
}

/** ggml's setup: float32 sums, min/max, the initial levels and error (iscale = 15 / range). */
function setup(x: Float32Array, xo: number, w: Float32Array, L: Uint8Array, off: number): boolean {
  let min = x[xo], max = x[xo];
  let sumW = w[0], sumX = Math.fround(w[0] * x[xo]);
  let sw = 0, sx = 0, sxx = 0, sabsx = 0, maxAbs = 0;
  for (let i = 0; i < N; i++) {
    const v = x[xo + i], wi = w[i];
    if (!(Math.abs(v) < Infinity)) throw new Error(`Q4_K: cannot quantize the non-finite value ${v}`);
    xs[i] = v;
    ws[i] = wi;
    if (i > 0) {
      if (v < min) min = v;
      if (v > max) max = v;
      sumW = Math.fround(sumW + wi);
      sumX = Math.fround(sumX + Math.fround(wi * v));
    }
    sw += wi;
    sx += wi * v;
    sxx += wi * v * v;
    sabsx += wi * Math.abs(v);
    maxAbs = Math.max(maxAbs, Math.abs(v));
  }
  if (min > 0) min = 0;
  st[MAX] = max;
  if (max === min) {
    L.fill(0, off, off + N);
    st[SCALE] = 0;
    st[MIN] = min;
    return false;
  }
  st[SW] = sw;
  st[SX] = sx;
  st[SXX] = sxx;
  st[SABSX] = sabsx;
  st[MAXABS] = maxAbs;
  st[SUM_W_F] = sumW;
  st[SUM_X_F] = sumX;
  setMin(min);
  const iscale = Math.fround(NMAX / st[RANGE]);
  const scale = Math.fround(1 / iscale);
  let err = 0;
  for (let i = 0; i < N; i++) {
    let l = Math.fround(iscale * xm[i]) + ROUND_F64 - ROUND_F64;
    l = l < 0 ? 0 : l > NMAX ? NMAX : l;
    L[off + i] = l;
    const diff = Math.fround(Math.fround(Math.fround(scale * l) + min) - xs[i]);
    err = Math.fround(err + Math.fround(ws[i] * Math.fround(diff * diff)));
  }
  st[BEST_ERR] = err;
  st[SCALE] = scale;
  return true;
}

/**
 * Q4_K sub-block search for the 32 values at x[xo..] with weights w[0..32): fills L[off..off+32) with levels
 * 0..15, returns the scale and stores -min in mins[j], exactly as ggml's make_qkx2_quants.
 */
export function makeQkx2Quants(
  x: Float32Array, xo: number, w: Float32Array, L: Uint8Array, off: number, mins: Float32Array, j: number,
): number {
  if (setup(x, xo, w, L, off)) {
    if (!(st[MAXABS] >= SMALL)) return makeQkx2QuantsRef(x, xo, w, L, off, mins, j); // tiny values: see the top
    // ggml judges every step 0..20. The fit of a step depends only on its levels (not on min), so a step with
    // the levels of the step before it gets that step's error again, which cannot beat the best error.
    let k = 0;
    track(0);
    let mustJudge = true; // step 0 is always judged
    for (;;) {
      if (mustJudge && judge(L, off)) {
        if (k === STEPS - 1) break;
        track(++k); // the new min moves every level: track again from the next step
        mustJudge = false;
        for (let i = 0; i < N; i++) if (cur[i] !== L[off + i]) mustJudge = true;
        continue;
      }
      if (k === STEPS - 1) break;
      mustJudge = applyStep(++k) > 0;
    }
  }
  mins[j] = -st[MIN];
  return st[SCALE];
}
