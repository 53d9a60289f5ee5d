// The reference of search-q4k.ts: make_qkx2_quants(32, 15, x, w, L, &min, Laux, -1, 0.1, 20, false) of
// ggml-quants.c written as ggml writes it, plain loops over every step, each float operation rounded to float32
// in ggml's order. Slow; a test (test/quant-search.test.ts) holds the fast search to it bit for bit.
import { nearestInt } from '../../../lib/gguf/float.js';

const f = Math.fround;
const N = 32; // values per sub-block
const NMAX = 15; // levels 0..15
const RMIN = -1;
const RDELTA = f(0.1);
const NSTEP = 20;

const Laux = new Uint8Array(N);

function level(iscale: number, v: number, min: number): number {
  const l = nearestInt(f(iscale * f(v - min)));
  return Math.max(0, Math.min(NMAX, l));
}

/** Same contract as makeQkx2Quants (search-q4k.ts): levels into L[off..off+32), -min into mins[j], returns the scale. */
export function makeQkx2QuantsRef(
  x: Float32Array, xo: number, w: Float32Array, L: Uint8Array, off: number, mins: Float32Array, j: number,
): number {
  let min = x[xo];
  let max = x[xo];
  let sumW = w[0];
  let sumX = f(sumW * x[xo]);
  for (let i = 1; i < N; i++) {
    if (x[xo + i] < min) min = x[xo + i];
    if (x[xo + i] > max) max = x[xo + i];
    sumW = f(sumW + w[i]);
    sumX = f(sumX + f(w[i] * x[xo + i]));
  }
  if (min > 0) min = 0;
  if (max === min) {
    for (let i = 0; i < N; i++) L[off + i] = 0;
    mins[j] = -min;
    return 0;
  }
  let iscale = f(NMAX / f(max - min));
  let scale = f(1 / iscale);
  let bestError = 0;
  for (let i = 0; i < N; i++) {
    L[off + i] = level(iscale, x[xo + i], min);
    const diff = f(f(f(scale * L[off + i]) + min) - x[xo + i]);
    bestError = f(bestError + f(w[i] * f(diff * diff)));
  }
  for (let is = 0; is <= NSTEP; is++) {
    iscale = f(f(f(RMIN + f(RDELTA * is)) + NMAX) / f(max - min));
    let sumL = 0, sumL2 = 0, sumXL = 0;
    for (let i = 0; i < N; i++) {
      const l = level(iscale, x[xo + i], min);
      Laux[i] = l;
      sumL = f(sumL + f(w[i] * l));
      sumL2 = f(sumL2 + f(f(w[i] * l) * l));
      sumXL = f(sumXL + f(f(w[i] * l) * x[xo + i]));
    }
    const D = f(f(sumW * sumL2) - f(sumL * sumL));
    if (!(D > 0)) continue;
    let thisScale = f(f(f(sumW * sumXL) - f(sumX * sumL)) / D);
    let thisMin = f(f(f(sumL2 * sumX) - f(sumL * sumXL)) / D);
    if (thisMin > 0) {
      thisMin = 0;
      thisScale = f(sumXL / sumL2);
    }
    let curError = 0;
    for (let i = 0; i < N; i++) {
      const diff = f(f(f(thisScale * Laux[i]) + thisMin) - x[xo + i]);
      curError = f(curError + f(w[i] * f(diff * diff)));
    }
    if (curError < bestError) {
      for (let i = 0; i < N; i++) L[off + i] = Laux[i];
      bestError = curError;
      scale = thisScale;
      min = thisMin;
    }
  }
  mins[j] = -min;
  return scale;
}
