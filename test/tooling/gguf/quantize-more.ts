// Encoders and decoders of the further ggml types fixtures can write (test tooling only): Q4_1, Q5_0, Q5_1,
// IQ4_NL (32-value blocks) and Q2_K, Q3_K, Q5_K, IQ4_XS (256-value super-blocks).
// Invariant: byte layouts equal ggml's (ggml-common.h) and every decoder computes dequantize_row_*'s float32
// values. Q4_1 / Q5_0 / Q5_1 follow quantize_row_*_ref step by step (the bytes llama-quantize writes without an
// imatrix); the others use plain max-abs / min-max scales with a nearest-level choice (valid, sane blocks, but
// not ggml's scale searches).
import { FP16_TABLE, fp32ToFp16Bits, nearestInt } from '../../../lib/gguf/float.js';

const fround = Math.fround;
const QK_K = 256;
/** kvalues_iq4nl: the 16 levels of IQ4_NL / IQ4_XS. */
const IQ4NL_LEVELS = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

function view(a: Uint8Array): DataView {
  return new DataView(a.buffer, a.byteOffset, a.byteLength);
}

const clamp = (v: number, lo: number, hi: number): number => Math.max(lo, Math.min(hi, v));

/** Value of largest magnitude in x[o..o+n) (the first one on ties, as ggml scans). */
function signedMax(x: Float32Array, o: number, n: number): number {
  let amax = 0, max = 0;
  for (let j = 0; j < n; j++) if (Math.abs(x[o + j]) > amax) { amax = Math.abs(x[o + j]); max = x[o + j]; }
  return max;
}

// --- Q4_1: d f16 @0, m f16 @2, qs u8[16] @4 -> 20 bytes; w = d * q + m

function quantizeQ4_1(x: Float32Array, out: Uint8Array): void {
  const dv = view(out);
  for (let b = 0, o = 0; b < x.length; b += 32, o += 20) {
    let min = Infinity, max = -Infinity;
    for (let j = 0; j < 32; j++) { min = Math.min(min, x[b + j]); max = Math.max(max, x[b + j]); }
    const d = fround((max - min) / 15), id = d !== 0 ? fround(1 / d) : 0;
    dv.setUint16(o, fp32ToFp16Bits(d), true);
    dv.setUint16(o + 2, fp32ToFp16Bits(min), true);
    for (let j = 0; j < 16; j++) {
      const q0 = Math.min(15, Math.trunc(fround(fround(fround(x[b + j] - min) * id) + 0.5)));
      const q1 = Math.min(15, Math.trunc(fround(fround(fround(x[b + 16 + j] - min) * id) + 0.5)));
      out[o + 4 + j] = q0 | (q1 << 4);
    }
  }
}

function dequantizeQ4_1(data: Uint8Array, y: Float32Array): void {
  const dv = view(data);
  for (let b = 0, o = 0; b < y.length; b += 32, o += 20) {
    const d = FP16_TABLE[dv.getUint16(o, true)], m = FP16_TABLE[dv.getUint16(o + 2, true)];
    for (let j = 0; j < 16; j++) {
      y[b + j] = fround(fround((data[o + 4 + j] & 0xf) * d) + m);
      y[b + 16 + j] = fround(fround((data[o + 4 + j] >> 4) * d) + m);
    }
  }
}

// --- Q5_0 / Q5_1: [d f16, (m f16)], qh u32 @+0, qs u8[16]; bit 4 of element j is bit j of qh

function pack5(out: Uint8Array, dv: DataView, qhAt: number, q: number[]): void {
  let qh = 0;
  for (let j = 0; j < 16; j++) {
    out[qhAt + 4 + j] = (q[j] & 0xf) | ((q[j + 16] & 0xf) << 4);
    qh |= ((q[j] >> 4) << j) | ((q[j + 16] >> 4) << (j + 16));
  }
  dv.setUint32(qhAt, qh >>> 0, true);
}

function unpack5(data: Uint8Array, dv: DataView, qhAt: number, j: number): number {
  const qh = dv.getUint32(qhAt, true);
  const low = j < 16 ? data[qhAt + 4 + j] & 0xf : data[qhAt + 4 + j - 16] >> 4;
  return low | (((qh >>> j) & 1) << 4);
}

function quantizeQ5_0(x: Float32Array, out: Uint8Array): void {
  const dv = view(out), q: number[] = new Array(32);
  for (let b = 0, o = 0; b < x.length; b += 32, o += 22) {
    const d = fround(signedMax(x, b, 32) / -16), id = d !== 0 ? fround(1 / d) : 0;
    dv.setUint16(o, fp32ToFp16Bits(d), true);
    for (let j = 0; j < 32; j++) q[j] = Math.min(31, Math.trunc(fround(fround(x[b + j] * id) + 16.5)));
    pack5(out, dv, o + 2, q);
  }
}

function dequantizeQ5_0(data: Uint8Array, y: Float32Array): void {
  const dv = view(data);
  for (let b = 0, o = 0; b < y.length; b += 32, o += 22) {
    const d = FP16_TABLE[dv.getUint16(o, true)];
    for (let j = 0; j < 32; j++) y[b + j] = fround((unpack5(data, dv, o + 2, j) - 16) * d);
  }
}

function quantizeQ5_1(x: Float32Array, out: Uint8Array): void {
  const dv = view(out), q: number[] = new Array(32);
  for (let b = 0, o = 0; b < x.length; b += 32, o += 24) {
    let min = Infinity, max = -Infinity;
    for (let j = 0; j < 32; j++) { min = Math.min(min, x[b + j]); max = Math.max(max, x[b + j]); }
    const d = fround((max - min) / 31), id = d !== 0 ? fround(1 / d) : 0;
    dv.setUint16(o, fp32ToFp16Bits(d), true);
    dv.setUint16(o + 2, fp32ToFp16Bits(min), true);
    for (let j = 0; j < 32; j++) q[j] = Math.min(31, Math.trunc(fround(fround(fround(x[b + j] - min) * id) + 0.5)));
    pack5(out, dv, o + 4, q);
  }
}

function dequantizeQ5_1(data: Uint8Array, y: Float32Array): void {
  const dv = view(data);
  for (let b = 0, o = 0; b < y.length; b += 32, o += 24) {
    const d = FP16_TABLE[dv.getUint16(o, true)], m = FP16_TABLE[dv.getUint16(o + 2, true)];
    for (let j = 0; j < 32; j++) y[b + j] = fround(fround(unpack5(data, dv, o + 4, j) * d) + m);
  }
}

// --- IQ4_NL: d f16 @0, qs u8[16] @2 -> 18 bytes; w = d * level[nibble]

/** Index of the level nearest to v. */
function nearestLevel(v: number): number {
  let best = 0;
  for (let k = 1; k < 16; k++) if (Math.abs(IQ4NL_LEVELS[k] - v) < Math.abs(IQ4NL_LEVELS[best] - v)) best = k;
  return best;
}

/** Scale of a run of n values for the non-linear levels: the largest magnitude on level -127, then one
 *  least-squares refit over the chosen levels. Writes the level indices into idx[0..n). */
function iq4Scale(x: Float32Array, o: number, n: number, idx: Uint8Array): number {
  let d = signedMax(x, o, n) / -127;
  if (d === 0) { idx.fill(8, 0, n); return 0; }
  for (let pass = 0; pass < 2; pass++) {
    let sxl = 0, sll = 0;
    for (let j = 0; j < n; j++) {
      idx[j] = nearestLevel(x[o + j] / d);
      sxl += x[o + j] * IQ4NL_LEVELS[idx[j]];
      sll += IQ4NL_LEVELS[idx[j]] ** 2;
    }
    if (pass === 0 && sll > 0) d = sxl / sll;
  }
  return d;
}

const idx32 = new Uint8Array(32);

function quantizeIQ4_NL(x: Float32Array, out: Uint8Array): void {
  const dv = view(out);
  for (let b = 0, o = 0; b < x.length; b += 32, o += 18) {
    const bits = fp32ToFp16Bits(iq4Scale(x, b, 32, idx32));
    dv.setUint16(o, bits, true);
    const d = FP16_TABLE[bits];
    for (let j = 0; j < 32; j++) idx32[j] = d !== 0 ? nearestLevel(x[b + j] / d) : 8;
    for (let j = 0; j < 16; j++) out[o + 2 + j] = idx32[j] | (idx32[j + 16] << 4);
  }
}

function dequantizeIQ4_NL(data: Uint8Array, y: Float32Array): void {
  const dv = view(data);
  for (let b = 0, o = 0; b < y.length; b += 32, o += 18) {
    const d = FP16_TABLE[dv.getUint16(o, true)];
    for (let j = 0; j < 16; j++) {
      y[b + j] = fround(d * IQ4NL_LEVELS[data[o + 2 + j] & 0xf]);
      y[b + 16 + j] = fround(d * IQ4NL_LEVELS[data[o + 2 + j] >> 4]);
    }
  }
}

// --- IQ4_XS: d f16 @0, scales_h u16 @2, scales_l u8[4] @4, qs u8[128] @8 -> 136 bytes;
//     sub-block j: w = d * (ls_j - 32) * level[nibble], ls 6-bit (low 4 in scales_l, high 2 in scales_h)

function quantizeIQ4_XS(x: Float32Array, out: Uint8Array): void {
  const dv = view(out), sub = new Float32Array(8);
  for (let b = 0, o = 0; b < x.length; b += QK_K, o += 136) {
    let smax = 0;
    for (let j = 0; j < 8; j++) {
      sub[j] = iq4Scale(x, b + 32 * j, 32, idx32);
      if (Math.abs(sub[j]) > Math.abs(smax)) smax = sub[j];
    }
    const bits = fp32ToFp16Bits(smax / -32);
    const d = FP16_TABLE[bits];
    dv.setUint16(o, bits, true);
    let sh = 0;
    out.fill(0, o + 4, o + 8);
    for (let j = 0; j < 8; j++) {
      const l = d !== 0 ? clamp(nearestInt(sub[j] / d), -32, 31) : 0;
      const ls = l + 32;
      out[o + 4 + (j >> 1)] |= (ls & 0xf) << (4 * (j & 1));
      sh |= (ls >> 4) << (2 * j);
      const dl = fround(d * l);
      for (let i = 0; i < 32; i++) idx32[i] = dl !== 0 ? nearestLevel(x[b + 32 * j + i] / dl) : 8;
      for (let i = 0; i < 16; i++) out[o + 8 + 16 * j + i] = idx32[i] | (idx32[i + 16] << 4);
    }
    dv.setUint16(o + 2, sh, true);
  }
}

function dequantizeIQ4_XS(data: Uint8Array, y: Float32Array): void {
  const dv = view(data);
  for (let b = 0, o = 0; b < y.length; b += QK_K, o += 136) {
    const d = FP16_TABLE[dv.getUint16(o, true)], sh = dv.getUint16(o + 2, true);
    for (let j = 0; j < 8; j++) {
      const ls = ((data[o + 4 + (j >> 1)] >> (4 * (j & 1))) & 0xf) | (((sh >> (2 * j)) & 3) << 4);
      const dl = fround(d * (ls - 32));
      for (let i = 0; i < 16; i++) {
        const q = data[o + 8 + 16 * j + i];
        y[b + 32 * j + i] = fround(dl * IQ4NL_LEVELS[q & 0xf]);
        y[b + 32 * j + 16 + i] = fround(dl * IQ4NL_LEVELS[q >> 4]);
      }
    }
  }
}

export const MORE_CODECS = {
  Q4_1: { encode: quantizeQ4_1, decode: dequantizeQ4_1 },
  Q5_0: { encode: quantizeQ5_0, decode: dequantizeQ5_0 },
  Q5_1: { encode: quantizeQ5_1, decode: dequantizeQ5_1 },
  IQ4_NL: { encode: quantizeIQ4_NL, decode: dequantizeIQ4_NL },
  IQ4_XS: { encode: quantizeIQ4_XS, decode: dequantizeIQ4_XS },
};
