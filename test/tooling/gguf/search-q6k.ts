// make_qx_quants(16, 32, x, L, rmse_type 1) of ggml-quants.c (the Q6_K sub-block scale search), exact and fast.
// Invariant: L and the returned scale are bit-identical to ggml's. ggml tries 20 iscales (step 0, then -9..9),
// rounding every value at each; here a value's level is evaluated at the two extreme steps plus near the few
// steps where it changes (levels are monotone in the step), sums are kept in double and updated per change,
// and a step's float32 sums (summed in ggml's order) are computed only when the double sums cannot rule the
// step out; every decision that is made is made on exactly ggml's float32 values.

const N = 16; // values per sub-block
const NMAX = 32; // levels -32..31
const STEPS = 19; // step index k = step + 9, step -9..9
const TENTH = Math.fround(0.1); // 0.1f
const GROUP_MAX_EPS = 1e-15;
const ROUND_F64 = 6755399441055744; // 1.5 * 2^52: (v + ROUND_F64) - ROUND_F64 rounds v to an integer, ties to even
// The float32 sums are within 18 * 2^-24 (1.1e-6, relative) of the double ones: every term w x l has the sign
// of iscale and every w l^2 >= 0, so nothing cancels; with the rounding of the two products, ggml's test
// sumlx^2 > best * suml2 cannot hold when the double sums miss it by 3.4e-6. Skipped: misses by 1e-5.
const SLACK = 1e-5;

// Scratch (module-level; makeQxQuants finishes before returning, so no reentrancy).
const xs = new Float64Array(N); // the values (float32)
const ws = new Float64Array(N); // w = fl(x * x)
const wxs = new Float64Array(N); // fl(w * x)
const iscales = new Float64Array(STEPS);
const lo = new Int8Array(N); // level of each value at k = 0
const cur = new Int8Array(N); // levels at the step being judged
const bucketLen = new Uint8Array(STEPS); // changes at step k: value index and new level
const bucketI = new Uint8Array(STEPS * N);
const bucketL = new Int8Array(STEPS * N);
// [sum w x l, sum w l^2] of the levels in cur (double), then ggml's scale and best of the best step so far,
// and 1 when the double sums may rule steps out. A typed array, not module-level `let`s: V8 boxes every
// double written to a module variable, which made this search several times slower.
const state = new Float64Array(5);
const D_LX = 0, D_L2 = 1, SCALE = 2, BEST = 3, FAST = 4;

function pAt(k: number, i: number): number {
  return Math.fround(iscales[k] * xs[i]);
}

/** ggml's level: clamp(nearest_int(iscale * x), -32, 31). */
function levelAt(k: number, i: number): number {
  const l = pAt(k, i) + ROUND_F64 - ROUND_F64;
  return l < -NMAX ? -NMAX : l > NMAX - 1 ? NMAX - 1 : l;
}

/**
 * Records the steps where value i changes level. Neighbouring steps move iscale * x by less than 0.12, so a
 * level changes by one at a time; each change is located by linear interpolation of iscale * x between the
 * end steps and then confirmed (and corrected) by direct evaluation, so it is exact.
 */
function findChanges(i: number): void {
  const l0 = levelAt(0, i);
  const l18 = levelAt(STEPS - 1, i);
  lo[i] = l0;
  if (l0 === l18 || !(Math.abs(l18 - l0) <= 2 * NMAX)) return; // (values are finite, so levels are too)
  const dir = l18 > l0 ? 1 : -1;
  const p0 = pAt(0, i);
  const stepsPerUnit = (STEPS - 1) / (pAt(STEPS - 1, i) - p0);
  let a = 0; // level(a) == level
  for (let level = l0; level !== l18; level += dir) {
    let k = Math.ceil((level + 0.5 * dir - p0) * stepsPerUnit);
    k = k <= a ? a + 1 : k > STEPS - 1 ? STEPS - 1 : k;
    while (levelAt(k, i) === level) k++; // level(STEPS - 1) != level, so this stops
    while (k - 1 > a && levelAt(k - 1, i) !== level) k--;
    const b = bucketLen[k]++;
    bucketI[k * N + b] = i;
    bucketL[k * N + b] = level + dir;
    a = k;
  }
}

/** Applies the level changes of step k to cur and the double sums. */
function applyStep(k: number): number {
  const n = bucketLen[k];
  let dLX = 0, dL2 = 0;
  for (let b = 0; b < n; b++) {
    const i = bucketI[k * N + b];
    const l = bucketL[k * N + b];
    const old = cur[i];
    cur[i] = l;
    dLX += wxs[i] * (l - old);
    dL2 += ws[i] * (l * l - old * old);
  }
  state[D_LX] += dLX;
  state[D_L2] += dL2;
  return n;
}

/** ggml's float32 sums for the levels in cur, in its order: [sumlx, suml2]. */
function exactSums(): [number, number] {
  let sumLX = 0, sumL2 = 0;
  for (let i = 0; i < N; i++) {
    const l = cur[i];
    sumLX = Math.fround(sumLX + Math.fround(wxs[i] * l));
    sumL2 = Math.fround(sumL2 + Math.fround(Math.fround(ws[i] * l) * l));
  }
  return [sumLX, sumL2];
}

/** One step of ggml's search, on the levels in cur (the first step always wins). */
function judge(first: boolean, L: Uint8Array, off: number): void {
  const best = state[BEST];
  if (!first && state[FAST] && best > 0 && state[D_LX] * state[D_LX] < best * state[D_L2] * (1 - SLACK)) return;
  const [sumLX, sumL2] = exactSums();
  if (first || (sumL2 > 0 && Math.fround(sumLX * sumLX) > Math.fround(best * sumL2))) {
    for (let i = 0; i < N; i++) L[off + i] = cur[i] + NMAX;
    const scale = sumL2 !== 0 ? Math.fround(sumLX / sumL2) : 0;
    state[SCALE] = scale;
    state[BEST] = Math.fround(scale * sumLX);
  }
}

function resetToStart(): void {
  let dLX = 0, dL2 = 0;
  for (let i = 0; i < N; i++) {
    const l = lo[i];
    cur[i] = l;
    dLX += wxs[i] * l;
    dL2 += ws[i] * l * l;
  }
  state[D_LX] = dLX;
  state[D_L2] = dL2;
}

/**
 * Q6_K sub-block search: fills L[off..off+16) with levels + 32 (0..63) for the 16 values at x[xo..] and
 * returns the scale, exactly as ggml's make_qx_quants(16, 32, x, L, 1, NULL).
 */
export function makeQxQuants(x: Float32Array, xo: number, L: Uint8Array, off: number): number {
  let max = 0, amax = 0;
  for (let i = 0; i < N; i++) {
    const v = x[xo + i];
    const ax = v < 0 ? -v : v;
    if (!(ax < Infinity)) throw new Error(`Q6_K: cannot quantize the non-finite value ${v}`);
    if (ax > amax) { amax = ax; max = v; }
    xs[i] = v;
    const w = Math.fround(v * v);
    ws[i] = w;
    wxs[i] = Math.fround(w * v);
  }
  if (amax < GROUP_MAX_EPS) {
    L.fill(0, off, off + N);
    return 0;
  }
  for (let k = 0; k < STEPS; k++) iscales[k] = Math.fround(-Math.fround(NMAX + Math.fround(TENTH * (k - 9))) / max);
  for (let k = 0; k < STEPS; k++) bucketLen[k] = 0;
  for (let i = 0; i < N; i++) findChanges(i);
  // no float32 subnormal or overflow near the largest terms: the relative bound holds
  state[FAST] = amax >= 1e-9 && amax <= 1e9 ? 1 : 0;
  state[SCALE] = 0;
  state[BEST] = 0;
  // ggml's order: step 0 (k = 9) first, then k = 0..18 without 9; a step with the same levels as the step
  // judged before it has the same sums and cannot change anything, so it is not judged
  resetToStart();
  let moved = 0;
  for (let k = 1; k <= 9; k++) moved += applyStep(k);
  judge(true, L, off);
  resetToStart();
  if (moved > 0) judge(false, L, off);
  let pending = 0; // level changes since the last judged step
  for (let k = 1; k < STEPS; k++) {
    pending += applyStep(k);
    if (k === 9 || pending === 0) continue; // k = 9 was judged first; 8 -> 10 takes both steps' changes
    pending = 0;
    judge(false, L, off);
  }
  return state[SCALE];
}
