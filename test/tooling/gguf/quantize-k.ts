// K-quant encoders and decoders (test tooling: fixtures only): Q4_K and Q6_K super-blocks of 256 values.
// Invariant: byte layouts equal ggml's block_q4_K / block_q6_K, and the encoders give exactly the bytes of
// quantize_row_q4_K_ref / quantize_row_q6_K_ref (what llama-quantize writes without an imatrix): every
// rounding is done in float32 as ggml does it; the sub-block searches are in search-q4k.ts / search-q6k.ts
// (fast), with plain ports of ggml's loops beside them (search-q4k-ref.ts / search-q6k-ref.ts), which the
// encoders take instead when a test asks.
import { FP16_TABLE, fp32ToFp16Bits, nearestInt } from '../../../lib/gguf/float.js';
import { makeQkx2Quants } from './search-q4k.js';
import { makeQxQuants } from './search-q6k.js';

/** The Q4_K sub-block search (make_qkx2_quants): levels into L[off..off+32), -min into mins[j]; returns the scale. */
export type Qkx2Search = (
  x: Float32Array, xo: number, w: Float32Array, L: Uint8Array, off: number, mins: Float32Array, j: number,
) => number;
/** The Q6_K sub-block search (make_qx_quants): levels + 32 into L[off..off+16); returns the scale. */
export type QxSearch = (x: Float32Array, xo: number, L: Uint8Array, off: number) => number;

const QK_K = 256;
const GROUP_MAX_EPS = 1e-15;

// block_q4_K: d f16 @0, dmin f16 @2, scales u8[12] @4, qs u8[128] @16 -> 144 bytes
const Q4K_BYTES = 144;
// block_q6_K: ql u8[128] @0, qh u8[64] @128, scales i8[16] @192, d f16 @208 -> 210 bytes
const Q6K_BYTES = 210;

// Scratch buffers (module-level; every function finishes before returning, so no reentrancy).
const L = new Uint8Array(QK_K);
const weights = new Float32Array(32);
const subScales = new Float32Array(16);
const subMins = new Float32Array(8);

/** get_scale_min_k4: 6-bit scale and min of sub-block j from the packed 12 scale bytes at `o`. */
function scaleMinK4(j: number, q: Uint8Array, o: number): [number, number] {
  if (j < 4) return [q[o + j] & 63, q[o + j + 4] & 63];
  return [(q[o + j + 4] & 0xf) | ((q[o + j - 4] >> 6) << 4), (q[o + j + 4] >> 4) | ((q[o + j] >> 6) << 4)];
}

export function quantizeQ4K(x: Float32Array, out: Uint8Array, search: Qkx2Search = makeQkx2Quants): void {
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (let xb = 0, o = 0; xb < x.length; xb += QK_K, o += Q4K_BYTES) {
    let maxScale = 0, maxMin = 0;
    for (let j = 0; j < 8; j++) {
      const xo = xb + 32 * j;
      let sumX2 = 0;
      for (let l = 0; l < 32; l++) sumX2 = Math.fround(sumX2 + Math.fround(x[xo + l] * x[xo + l]));
      const avX = Math.fround(Math.sqrt(Math.fround(sumX2 / 32)));
      for (let l = 0; l < 32; l++) weights[l] = avX + Math.abs(x[xo + l]); // rounded by the Float32Array
      subScales[j] = search(x, xo, weights, L, 32 * j, subMins, j);
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

export function quantizeQ6K(x: Float32Array, out: Uint8Array, search: QxSearch = makeQxQuants): void {
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (let xb = 0, o = 0; xb < x.length; xb += QK_K, o += Q6K_BYTES) {
    let maxScale = 0, maxAbsScale = 0;
    for (let ib = 0; ib < 16; ib++) {
      const scale = search(x, xb + 16 * ib, L, 16 * ib);
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
