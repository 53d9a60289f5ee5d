// K-quant encoders and decoders: Q4_K and Q6_K super-blocks of 256 values.
// Invariant: byte layouts equal ggml's block_q4_K / block_q6_K; the encoders follow quantize_row_q4_K_ref /
// quantize_row_q6_K_ref (make_qkx2_quants / make_qx_quants scale search) in float32 where it decides a
// rounding, so the result is the reference encoding up to rare float-summation-order ties.
import { FP16_TABLE, fp32ToFp16Bits, nearestInt } from './float.js';

const QK_K = 256;
const GROUP_MAX_EPS = 1e-15;

const TENTH = Math.fround(0.1); // 0.1f

// block_q4_K: d f16 @0, dmin f16 @2, scales u8[12] @4, qs u8[128] @16 -> 144 bytes
const Q4K_BYTES = 144;
// block_q6_K: ql u8[128] @0, qh u8[64] @128, scales i8[16] @192, d f16 @208 -> 210 bytes
const Q6K_BYTES = 210;

// Scratch buffers (module-level; every function finishes before returning, so no reentrancy).
const L = new Uint8Array(QK_K);
const laux = new Uint8Array(32);
const weights = new Float32Array(32);
const subScales = new Float32Array(16);
const subMins = new Float32Array(8);
const xm = new Float32Array(32);
const xw = new Float32Array(16);
const qaux = new Uint8Array(16);
const MAGIC = 12582912; // 1.5 * 2^23: Math.fround(v + MAGIC) - MAGIC is nearest_int(v) for |v| < 2^22

/** make_qkx2_quants for sub-block j (32 values at xo): fills L[off..off+32), subScales[j] and subMins[j] (= -min). */
function makeQkx2Quants(x: Float32Array, xo: number, off: number, j: number): void {
  const n = 32, nmax = 15, nstep = 20;
  let min = x[xo], max = x[xo];
  let sumW = weights[0], sumX = Math.fround(sumW * x[xo]);
  for (let i = 1; i < n; i++) {
    const v = x[xo + i];
    if (v < min) min = v;
    if (v > max) max = v;
    sumW = Math.fround(sumW + weights[i]);
    sumX = Math.fround(sumX + Math.fround(weights[i] * v));
  }
  if (min > 0) min = 0;
  if (max === min) {
    for (let i = 0; i < n; i++) L[off + i] = 0;
    subScales[j] = 0;
    subMins[j] = -min;
    return;
  }
  // the search below reads the live `min` (it changes when a step wins): xm and range follow it
  let range = Math.fround(max - min);
  for (let i = 0; i < n; i++) xm[i] = x[xo + i] - min; // rounded to float32 by the array
  let iscale = Math.fround(nmax / range);
  let scale = Math.fround(1 / iscale);
  let bestError = 0;
  for (let i = 0; i < n; i++) {
    let l = Math.fround(Math.fround(iscale * xm[i]) + MAGIC) - MAGIC;
    l = l < 0 ? 0 : l > nmax ? nmax : l;
    L[off + i] = l;
    laux[i] = 255; // forces the first search step to be evaluated
    const diff = Math.fround(Math.fround(Math.fround(scale * l) + min) - x[xo + i]);
    bestError = Math.fround(bestError + Math.fround(weights[i] * Math.fround(diff * diff)));
  }
  for (let is = 0; is <= nstep; is++) {
    iscale = Math.fround(Math.fround(Math.fround(-1 + Math.fround(TENTH * is)) + nmax) / range);
    let changed = false;
    for (let i = 0; i < n; i++) {
      let l = Math.fround(Math.fround(iscale * xm[i]) + MAGIC) - MAGIC;
      l = l < 0 ? 0 : l > nmax ? nmax : l;
      if (laux[i] !== l) { laux[i] = l; changed = true; }
    }
    if (!changed) continue; // same levels as the previous step: same result, already judged
    let sumL = 0, sumL2 = 0, sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = laux[i];
      const wl = Math.fround(weights[i] * l);
      sumL = Math.fround(sumL + wl);
      sumL2 = Math.fround(sumL2 + Math.fround(wl * l));
      sumXL = Math.fround(sumXL + Math.fround(wl * x[xo + i]));
    }
    const D = Math.fround(Math.fround(sumW * sumL2) - Math.fround(sumL * sumL));
    if (D <= 0) continue;
    let thisScale = Math.fround(Math.fround(Math.fround(sumW * sumXL) - Math.fround(sumX * sumL)) / D);
    let thisMin = Math.fround(Math.fround(Math.fround(sumL2 * sumX) - Math.fround(sumL * sumXL)) / D);
    if (thisMin > 0) {
      thisMin = 0;
      thisScale = Math.fround(sumXL / sumL2);
    }
    let curError = 0;
    for (let i = 0; i < n; i++) {
      const diff = Math.fround(Math.fround(Math.fround(thisScale * laux[i]) + thisMin) - x[xo + i]);
      curError = Math.fround(curError + Math.fround(weights[i] * Math.fround(diff * diff)));
    }
    if (curError < bestError) {
      for (let i = 0; i < n; i++) L[off + i] = laux[i];
      bestError = curError;
      scale = thisScale;
      min = thisMin;
      range = Math.fround(max - min);
      for (let i = 0; i < n; i++) xm[i] = x[xo + i] - min;
    }
  }
  subScales[j] = scale;
  subMins[j] = -min;
}

/** get_scale_min_k4: 6-bit scale and min of sub-block j from the packed 12 scale bytes at `o`. */
function scaleMinK4(j: number, q: Uint8Array, o: number): [number, number] {
  if (j < 4) return [q[o + j] & 63, q[o + j + 4] & 63];
  return [(q[o + j + 4] & 0xf) | ((q[o + j - 4] >> 6) << 4), (q[o + j + 4] >> 4) | ((q[o + j] >> 6) << 4)];
}

export function quantizeQ4K(x: Float32Array, out: Uint8Array): void {
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (let xb = 0, o = 0; xb < x.length; xb += QK_K, o += Q4K_BYTES) {
    let maxScale = 0, maxMin = 0;
    for (let j = 0; j < 8; j++) {
      const xo = xb + 32 * j;
      let sumX2 = 0;
      for (let l = 0; l < 32; l++) sumX2 = Math.fround(sumX2 + Math.fround(x[xo + l] * x[xo + l]));
      const avX = Math.fround(Math.sqrt(Math.fround(sumX2 / 32)));
      for (let l = 0; l < 32; l++) weights[l] = avX + Math.abs(x[xo + l]); // rounded by the Float32Array
      makeQkx2Quants(x, xo, 32 * j, j);
      if (subScales[j] > maxScale) maxScale = subScales[j];
      if (subMins[j] > maxMin) maxMin = subMins[j];
    }
    const invScale = maxScale > 0 ? Math.fround(63 / maxScale) : 0;
    const invMin = maxMin > 0 ? Math.fround(63 / maxMin) : 0;
    const sc = o + 4;
    out.fill(0, sc, sc + 12);
    for (let j = 0; j < 8; j++) {
      const ls = Math.max(0, Math.min(63, nearestInt(Math.fround(invScale * subScales[j]))));
      const lm = Math.max(0, Math.min(63, nearestInt(Math.fround(invMin * subMins[j]))));
      if (j < 4) {
        out[sc + j] = ls;
        out[sc + j + 4] = lm;
      } else {
        out[sc + j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
        out[sc + j - 4] |= (ls >> 4) << 6;
        out[sc + j] |= (lm >> 4) << 6;
      }
    }
    const dBits = fp32ToFp16Bits(maxScale / 63);
    const dminBits = fp32ToFp16Bits(maxMin / 63);
    dv.setUint16(o, dBits, true);
    dv.setUint16(o + 2, dminBits, true);
    for (let j = 0; j < 8; j++) {
      const [s, m] = scaleMinK4(j, out, sc);
      const d = Math.fround(FP16_TABLE[dBits] * s);
      if (d === 0) continue;
      const dm = Math.fround(FP16_TABLE[dminBits] * m);
      for (let ii = 0; ii < 32; ii++) {
        const l = nearestInt(Math.fround(Math.fround(x[xb + 32 * j + ii] + dm) / d));
        L[32 * j + ii] = Math.max(0, Math.min(15, l));
      }
    }
    for (let j = 0, q = o + 16; j < QK_K; j += 64, q += 32) {
      for (let l = 0; l < 32; l++) out[q + l] = L[j + l] | (L[j + l + 32] << 4);
    }
  }
}

export function dequantizeQ4K(data: Uint8Array, y: Float32Array): void {
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let yb = 0, o = 0; yb < y.length; yb += QK_K, o += Q4K_BYTES) {
    const d = FP16_TABLE[dv.getUint16(o, true)];
    const dmin = FP16_TABLE[dv.getUint16(o + 2, true)];
    for (let j = 0, is = 0, q = o + 16; j < QK_K; j += 64, is += 2, q += 32) {
      const [s1, m1] = scaleMinK4(is, data, o + 4);
      const [s2, m2] = scaleMinK4(is + 1, data, o + 4);
      const d1 = d * s1, dm1 = dmin * m1, d2 = d * s2, dm2 = dmin * m2;
      for (let l = 0; l < 32; l++) y[yb + j + l] = d1 * (data[q + l] & 0xf) - dm1;
      for (let l = 0; l < 32; l++) y[yb + j + 32 + l] = d2 * (data[q + l] >> 4) - dm2;
    }
  }
}

/** make_qx_quants(16, 32, x, L, rmse_type 1): fills L[off..off+16) with values in [0, 63], returns the scale. */
function makeQxQuants(x: Float32Array, xo: number, off: number): number {
  const n = 16, nmax = 32;
  let max = 0, amax = 0;
  for (let i = 0; i < n; i++) {
    const v = x[xo + i];
    const ax = v < 0 ? -v : v;
    if (ax > amax) { amax = ax; max = v; }
    xw[i] = v * v; // w = x^2 (rmse_type 1), rounded to float32 by the array
  }
  if (amax < GROUP_MAX_EPS) {
    for (let i = 0; i < n; i++) L[off + i] = 0;
    return 0;
  }
  let scale = 0, best = 0;
  let sumLX = 0, sumL2 = 0;
  for (let is = 0; is <= 19; is++) {
    // step 0 is the plain estimate; then is = -9..9 without 0, in ggml's order
    const step = is === 0 ? 0 : is <= 9 ? is - 10 : is - 9;
    const iscale = Math.fround(-Math.fround(nmax + Math.fround(TENTH * step)) / max);
    let changed = is === 0;
    for (let i = 0; i < n; i++) {
      let l = Math.fround(Math.fround(iscale * x[xo + i]) + MAGIC) - MAGIC;
      l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
      if (qaux[i] !== l + nmax) { qaux[i] = l + nmax; changed = true; }
    }
    if (changed) { // the sums depend only on the levels: unchanged levels reuse the previous sums
      sumLX = 0;
      sumL2 = 0;
      for (let i = 0; i < n; i++) {
        const l = qaux[i] - nmax;
        const w = xw[i];
        sumLX = Math.fround(sumLX + Math.fround(Math.fround(w * x[xo + i]) * l));
        sumL2 = Math.fround(sumL2 + Math.fround(Math.fround(w * l) * l));
      }
    }
    if (is === 0) {
      scale = sumL2 !== 0 ? Math.fround(sumLX / sumL2) : 0;
      best = Math.fround(scale * sumLX);
      for (let i = 0; i < n; i++) L[off + i] = qaux[i];
    } else if (sumL2 > 0 && Math.fround(sumLX * sumLX) > Math.fround(best * sumL2)) {
      for (let i = 0; i < n; i++) L[off + i] = qaux[i];
      scale = Math.fround(sumLX / sumL2);
      best = Math.fround(scale * sumLX);
    }
  }
  return scale;
}

export function quantizeQ6K(x: Float32Array, out: Uint8Array): void {
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (let xb = 0, o = 0; xb < x.length; xb += QK_K, o += Q6K_BYTES) {
    let maxScale = 0, maxAbsScale = 0;
    for (let ib = 0; ib < 16; ib++) {
      const scale = makeQxQuants(x, xb + 16 * ib, 16 * ib);
      subScales[ib] = scale;
      if (Math.abs(scale) > maxAbsScale) { maxAbsScale = Math.abs(scale); maxScale = scale; }
    }
    if (maxAbsScale < GROUP_MAX_EPS) {
      out.fill(0, o, o + Q6K_BYTES);
      continue;
    }
    const iscale = Math.fround(-128 / maxScale);
    const dBits = fp32ToFp16Bits(1 / iscale);
    dv.setUint16(o + 208, dBits, true);
    for (let ib = 0; ib < 16; ib++) {
      dv.setInt8(o + 192 + ib, Math.max(-128, Math.min(127, nearestInt(Math.fround(iscale * subScales[ib])))));
    }
    for (let j = 0; j < 16; j++) {
      const d = Math.fround(FP16_TABLE[dBits] * dv.getInt8(o + 192 + j));
      if (d === 0) continue;
      for (let ii = 0; ii < 16; ii++) {
        const l = nearestInt(Math.fround(x[xb + 16 * j + ii] / d));
        L[16 * j + ii] = Math.max(-32, Math.min(31, l)) + 32;
      }
    }
    for (let j = 0, ql = o, qh = o + 128; j < QK_K; j += 128, ql += 64, qh += 32) {
      for (let l = 0; l < 32; l++) {
        const l0 = L[j + l], l1 = L[j + l + 32], l2 = L[j + l + 64], l3 = L[j + l + 96];
        out[ql + l] = (l0 & 0xf) | ((l2 & 0xf) << 4);
        out[ql + l + 32] = (l1 & 0xf) | ((l3 & 0xf) << 4);
        out[qh + l] = (l0 >> 4) | ((l1 >> 4) << 2) | ((l2 >> 4) << 4) | ((l3 >> 4) << 6);
      }
    }
  }
}

export function dequantizeQ6K(data: Uint8Array, y: Float32Array): void {
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let yb = 0, o = 0; yb < y.length; yb += QK_K, o += Q6K_BYTES) {
    const d = FP16_TABLE[dv.getUint16(o + 208, true)];
    for (let n = 0, ql = o, qh = o + 128, sc = o + 192; n < QK_K; n += 128, ql += 64, qh += 32, sc += 8) {
      for (let l = 0; l < 32; l++) {
        const is = l >> 4;
        const h = data[qh + l];
        const q1 = ((data[ql + l] & 0xf) | ((h & 3) << 4)) - 32;
        const q2 = ((data[ql + l + 32] & 0xf) | (((h >> 2) & 3) << 4)) - 32;
        const q3 = ((data[ql + l] >> 4) | (((h >> 4) & 3) << 4)) - 32;
        const q4 = ((data[ql + l + 32] >> 4) | (((h >> 6) & 3) << 4)) - 32;
        y[yb + n + l] = d * dv.getInt8(sc + is) * q1;
        y[yb + n + l + 32] = d * dv.getInt8(sc + is + 2) * q2;
        y[yb + n + l + 64] = d * dv.getInt8(sc + is + 4) * q3;
        y[yb + n + l + 96] = d * dv.getInt8(sc + is + 6) * q4;
      }
    }
  }
}
