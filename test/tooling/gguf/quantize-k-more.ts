// Encoders and decoders of the K-quants Q2_K, Q3_K and Q5_K (test tooling only: fixtures), super-blocks of 256.
// Invariant: byte layouts equal ggml's block_q2_K / block_q3_K / block_q5_K and the decoders compute
// dequantize_row_*'s float32 values; the encoders use plain min-max (Q2_K, Q5_K) or max-abs (Q3_K) group
// scales, quantized to the type's scale bits, then the nearest level (valid, sane blocks, not ggml's searches).
import { FP16_TABLE, fp32ToFp16Bits, nearestInt } from '../../../lib/gguf/float.js';

const fround = Math.fround;
const QK_K = 256;
const clamp = (v: number, lo: number, hi: number): number => Math.max(lo, Math.min(hi, v));

function view(a: Uint8Array): DataView {
  return new DataView(a.buffer, a.byteOffset, a.byteLength);
}

const L = new Uint8Array(QK_K);
const groupScale = new Float32Array(16);
const groupMin = new Float32Array(16);

/** Per-group affine fit of x[o..o+256) in groups of n: scale (max - min) / levels and min = -min(0, lo). */
function minMaxGroups(x: Float32Array, o: number, n: number, levels: number): void {
  for (let g = 0; g < QK_K / n; g++) {
    let lo = 0, hi = -Infinity;
    for (let l = 0; l < n; l++) { lo = Math.min(lo, x[o + n * g + l]); hi = Math.max(hi, x[o + n * g + l]); }
    groupScale[g] = Math.max(0, (hi - lo) / levels);
    groupMin[g] = -lo;
  }
}

/** Quantizes the groups' scales and mins to `bits`-bit integers under two fp16 super-scales; fills
 *  L[0..256) with the levels 0..qmax of x = d * sc * q - dmin * m. Returns [dBits, dminBits, sc[], m[]]. */
function affineSuperBlock(x: Float32Array, o: number, n: number, qmax: number, bits: number):
[number, number, number[], number[]] {
  const ng = QK_K / n, smax = (1 << bits) - 1;
  minMaxGroups(x, o, n, qmax);
  let maxS = 0, maxM = 0;
  for (let g = 0; g < ng; g++) { maxS = Math.max(maxS, groupScale[g]); maxM = Math.max(maxM, groupMin[g]); }
  const dBits = fp32ToFp16Bits(maxS / smax), dminBits = fp32ToFp16Bits(maxM / smax);
  const d = FP16_TABLE[dBits], dmin = FP16_TABLE[dminBits];
  const sc: number[] = [], m: number[] = [];
  for (let g = 0; g < ng; g++) {
    sc.push(d > 0 ? clamp(nearestInt(groupScale[g] / d), 0, smax) : 0);
    m.push(dmin > 0 ? clamp(nearestInt(groupMin[g] / dmin), 0, smax) : 0);
    const dl = fround(d * sc[g]), ml = fround(dmin * m[g]);
    for (let l = 0; l < n; l++) L[n * g + l] = dl > 0 ? clamp(nearestInt((x[o + n * g + l] + ml) / dl), 0, qmax) : 0;
  }
  return [dBits, dminBits, sc, m];
}

// --- Q2_K: scales u8[16] @0 (low 4: scale, high 4: min), qs u8[64] @16, d f16 @80, dmin f16 @82 -> 84 bytes.
//     Element 128h + 32c + l is bits 2c..2c+1 of qs[32h + l].

function quantizeQ2K(x: Float32Array, out: Uint8Array): void {
  const dv = view(out);
  for (let xb = 0, o = 0; xb < x.length; xb += QK_K, o += 84) {
    const [dBits, dminBits, sc, m] = affineSuperBlock(x, xb, 16, 3, 4);
    for (let g = 0; g < 16; g++) out[o + g] = sc[g] | (m[g] << 4);
    out.fill(0, o + 16, o + 80);
    for (let i = 0; i < QK_K; i++) out[o + 16 + 32 * (i >> 7) + (i & 31)] |= L[i] << (2 * ((i & 127) >> 5));
    dv.setUint16(o + 80, dBits, true);
    dv.setUint16(o + 82, dminBits, true);
  }
}

function dequantizeQ2K(data: Uint8Array, y: Float32Array): void {
  const dv = view(data);
  for (let yb = 0, o = 0; yb < y.length; yb += QK_K, o += 84) {
    const d = FP16_TABLE[dv.getUint16(o + 80, true)], dmin = FP16_TABLE[dv.getUint16(o + 82, true)];
    for (let i = 0; i < QK_K; i++) {
      const sc = data[o + (i >> 4)];
      const q = (data[o + 16 + 32 * (i >> 7) + (i & 31)] >> (2 * ((i & 127) >> 5))) & 3;
      y[yb + i] = fround(fround(fround(d * (sc & 0xf)) * q) - fround(dmin * (sc >> 4)));
    }
  }
}

// --- Q3_K: hmask u8[32] @0, qs u8[64] @32, scales u8[12] @96, d f16 @108 -> 110 bytes; w = d * (sc - 32) * q,
//     q = low2 - (high bit ? 0 : 4) in -4..3; group g's 6-bit sc: low 4 in scales[g % 8] (nibble g / 8), high 2
//     in scales[8 + g % 4] (bits 2 * (g / 4)).

function q3Scale(data: Uint8Array, s: number, g: number): number {
  const low = g < 8 ? data[s + g] & 0xf : data[s + g - 8] >> 4;
  return low | (((data[s + 8 + (g & 3)] >> (2 * (g >> 2))) & 3) << 4);
}

function quantizeQ3K(x: Float32Array, out: Uint8Array): void {
  const dv = view(out);
  for (let xb = 0, o = 0; xb < x.length; xb += QK_K, o += 110) {
    let smax = 0;
    for (let g = 0; g < 16; g++) {
      let amax = 0, max = 0;
      for (let l = 0; l < 16; l++) {
        const v = x[xb + 16 * g + l];
        if (Math.abs(v) > amax) { amax = Math.abs(v); max = v; }
      }
      groupScale[g] = max / -4; // the largest magnitude on level -4
      if (Math.abs(groupScale[g]) > Math.abs(smax)) smax = groupScale[g];
    }
    const dBits = fp32ToFp16Bits(smax / -32);
    const d = FP16_TABLE[dBits];
    out.fill(0, o, o + 110);
    for (let g = 0; g < 16; g++) {
      const l = d !== 0 ? clamp(nearestInt(groupScale[g] / d), -32, 31) : 0;
      const sc = l + 32;
      out[o + 96 + (g & 7)] |= (sc & 0xf) << (4 * (g >> 3));
      out[o + 96 + 8 + (g & 3)] |= (sc >> 4) << (2 * (g >> 2));
      const dl = fround(d * l);
      for (let i = 16 * g; i < 16 * g + 16; i++) {
        const q = (dl !== 0 ? clamp(nearestInt(x[xb + i] / dl), -4, 3) : 0) + 4; // 0..7
        const h = i >> 7, c = (i & 127) >> 5, lane = i & 31;
        out[o + 32 + 32 * h + lane] |= (q & 3) << (2 * c);
        if (q >= 4) out[o + lane] |= 1 << (4 * h + c);
      }
    }
    dv.setUint16(o + 108, dBits, true);
  }
}

function dequantizeQ3K(data: Uint8Array, y: Float32Array): void {
  const dv = view(data);
  for (let yb = 0, o = 0; yb < y.length; yb += QK_K, o += 110) {
    const d = FP16_TABLE[dv.getUint16(o + 108, true)];
    for (let i = 0; i < QK_K; i++) {
      const h = i >> 7, c = (i & 127) >> 5, lane = i & 31;
      const high = (data[o + lane] >> (4 * h + c)) & 1;
      const q = ((data[o + 32 + 32 * h + lane] >> (2 * c)) & 3) - (high ? 0 : 4);
      y[yb + i] = fround(fround(d * (q3Scale(data, o + 96, i >> 4) - 32)) * q);
    }
  }
}

// --- Q5_K: d f16 @0, dmin f16 @2, scales u8[12] @4 (as Q4_K), qh u8[32] @16, qs u8[128] @48 -> 176 bytes;
//     sub-block j of 32: low 4 bits as Q4_K's nibbles, bit 4 of element 32j + l is bit j of qh[l].

function packScalesK4(sc: number[], m: number[], out: Uint8Array, s: number): void {
  out.fill(0, s, s + 12);
  for (let j = 0; j < 8; j++) {
    if (j < 4) {
      out[s + j] |= sc[j];
      out[s + j + 4] |= m[j];
    } else {
      out[s + j + 4] = (sc[j] & 0xf) | ((m[j] & 0xf) << 4);
      out[s + j - 4] |= (sc[j] >> 4) << 6;
      out[s + j] |= (m[j] >> 4) << 6;
    }
  }
}

function scaleMinK4(j: number, q: Uint8Array, o: number): [number, number] {
  if (j < 4) return [q[o + j] & 63, q[o + j + 4] & 63];
  return [(q[o + j + 4] & 0xf) | ((q[o + j - 4] >> 6) << 4), (q[o + j + 4] >> 4) | ((q[o + j] >> 6) << 4)];
}

function quantizeQ5K(x: Float32Array, out: Uint8Array): void {
  const dv = view(out);
  for (let xb = 0, o = 0; xb < x.length; xb += QK_K, o += 176) {
    const [dBits, dminBits, sc, m] = affineSuperBlock(x, xb, 32, 31, 6);
    dv.setUint16(o, dBits, true);
    dv.setUint16(o + 2, dminBits, true);
    packScalesK4(sc, m, out, o + 4);
    out.fill(0, o + 16, o + 176);
    for (let i = 0; i < QK_K; i++) {
      const j = i >> 5, l = i & 31;
      out[o + 48 + 32 * (j >> 1) + l] |= (L[i] & 0xf) << (4 * (j & 1));
      out[o + 16 + l] |= (L[i] >> 4) << j;
    }
  }
}

function dequantizeQ5K(data: Uint8Array, y: Float32Array): void {
  const dv = view(data);
  for (let yb = 0, o = 0; yb < y.length; yb += QK_K, o += 176) {
    const d = FP16_TABLE[dv.getUint16(o, true)], dmin = FP16_TABLE[dv.getUint16(o + 2, true)];
    for (let j = 0; j < 8; j++) {
      const [s, m] = scaleMinK4(j, data, o + 4);
      const dl = fround(d * s), ml = fround(dmin * m);
      for (let l = 0; l < 32; l++) {
        const q = ((data[o + 48 + 32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xf) + (((data[o + 16 + l] >> j) & 1) << 4);
        y[yb + 32 * j + l] = fround(fround(dl * q) - ml);
      }
    }
  }
}

export const MORE_K_CODECS = {
  Q2_K: { encode: quantizeQ2K, decode: dequantizeQ2K },
  Q3_K: { encode: quantizeQ3K, decode: dequantizeQ3K },
  Q5_K: { encode: quantizeQ5K, decode: dequantizeQ5K },
};
