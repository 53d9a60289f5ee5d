// The reference of search-q6k.ts: make_qx_quants(16, 32, x, L, rmse_type 1, NULL) of ggml-quants.c written as
// ggml writes it, plain loops over every step, each float operation rounded to float32 in ggml's order. Slow; a
// test (test/quant-search.test.ts) holds the fast search to it bit for bit.
import { nearestInt } from '../../../lib/gguf/float.js';

const f = Math.fround;
const N = 16; // values per sub-block
const NMAX = 32; // levels -32..31
const GROUP_MAX_EPS = f(1e-15);
const TENTH = f(0.1);

function level(iscale: number, v: number): number {
  return Math.max(-NMAX, Math.min(NMAX - 1, nearestInt(f(iscale * v))));
}

/** Same contract as makeQxQuants (search-q6k.ts): levels + 32 into L[off..off+16), returns the scale. */
export function makeQxQuantsRef(x: Float32Array, xo: number, L: Uint8Array, off: number): number {
  let max = 0;
  let amax = 0;
  for (let i = 0; i < N; i++) {
    const ax = Math.abs(x[xo + i]);
    if (ax > amax) {
      amax = ax;
      max = x[xo + i];
    }
  }
  if (amax < GROUP_MAX_EPS) {
    for (let i = 0; i < N; i++) L[off + i] = 0;
    return 0;
  }
  // rmse_type 1: weights w = x * x
  const sums = (iscale: number): [number, number] => {
    let sumlx = 0, suml2 = 0;
    for (let i = 0; i < N; i++) {
      const v = x[xo + i];
      const l = level(iscale, v);
      const w = f(v * v);
      sumlx = f(sumlx + f(f(w * v) * l));
      suml2 = f(suml2 + f(f(w * l) * l));
    }
    return [sumlx, suml2];
  };
  let iscale = f(-NMAX / max);
  for (let i = 0; i < N; i++) L[off + i] = NMAX + level(iscale, x[xo + i]);
  let [sumlx, suml2] = sums(iscale);
  let scale = suml2 !== 0 ? f(sumlx / suml2) : 0;
  let best = f(scale * sumlx);
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue;
    iscale = f(-f(NMAX + f(TENTH * is)) / max);
    [sumlx, suml2] = sums(iscale);
    if (suml2 > 0 && f(sumlx * sumlx) > f(best * suml2)) {
      for (let i = 0; i < N; i++) L[off + i] = NMAX + level(iscale, x[xo + i]);
      scale = f(sumlx / suml2);
      best = f(scale * sumlx);
    }
  }
  return scale;
}
