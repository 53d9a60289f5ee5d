// Float32 -> ggml tensor encodings (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K) and back.
// Invariant: output bytes follow ggml's block layouts exactly (ggml-common.h), little-endian; the Q8_0/Q4_0
// encoders follow quantize_row_*_ref step by step (float32 rounding included), F16 and BF16 round to nearest
// even like GGML_FP32_TO_FP16 / GGML_FP32_TO_BF16. K-quants live in quantize-k.ts.
import { GGML_TYPE_TRAITS, GgmlType } from './constants.js';
import { FP16_TABLE, bf16BitsToFp32, fp32ToBf16Bits, fp32ToFp16Bits } from './float.js';
import { dequantizeQ4K, dequantizeQ6K, quantizeQ4K, quantizeQ6K } from './quantize-k.js';

export { FP16_TABLE, bf16BitsToFp32, fp16BitsToFp32, fp32ToBf16Bits, fp32ToFp16Bits, nearestInt } from './float.js';

/** C roundf: halves away from zero. */
function roundAway(v: number): number {
  return v < 0 ? -Math.round(-v) : Math.round(v);
}

const fround = Math.fround;

function quantizeQ8_0(x: Float32Array, out: Uint8Array): void {
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (let b = 0, o = 0; b < x.length; b += 32, o += 34) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b + j]));
    const d = fround(amax / 127);
    const id = d !== 0 ? fround(1 / d) : 0;
    dv.setUint16(o, fp32ToFp16Bits(d), true);
    for (let j = 0; j < 32; j++) dv.setInt8(o + 2 + j, roundAway(fround(x[b + j] * id)));
  }
}

function dequantizeQ8_0(data: Uint8Array, y: Float32Array): void {
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let b = 0, o = 0; b < y.length; b += 32, o += 34) {
    const d = FP16_TABLE[dv.getUint16(o, true)];
    for (let j = 0; j < 32; j++) y[b + j] = dv.getInt8(o + 2 + j) * d;
  }
}

function quantizeQ4_0(x: Float32Array, out: Uint8Array): void {
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (let b = 0, o = 0; b < x.length; b += 32, o += 18) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < 32; j++) {
      const v = x[b + j];
      if (amax < Math.abs(v)) { amax = Math.abs(v); max = v; }
    }
    const d = fround(max / -8);
    const id = d !== 0 ? fround(1 / d) : 0;
    dv.setUint16(o, fp32ToFp16Bits(d), true);
    for (let j = 0; j < 16; j++) {
      const x0 = fround(x[b + j] * id);
      const x1 = fround(x[b + 16 + j] * id);
      const xi0 = Math.min(15, Math.trunc(fround(x0 + 8.5)));
      const xi1 = Math.min(15, Math.trunc(fround(x1 + 8.5)));
      out[o + 2 + j] = xi0 | (xi1 << 4);
    }
  }
}

function dequantizeQ4_0(data: Uint8Array, y: Float32Array): void {
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let b = 0, o = 0; b < y.length; b += 32, o += 18) {
    const d = FP16_TABLE[dv.getUint16(o, true)];
    for (let j = 0; j < 16; j++) {
      const q = data[o + 2 + j];
      y[b + j] = ((q & 0xf) - 8) * d;
      y[b + 16 + j] = ((q >> 4) - 8) * d;
    }
  }
}

function checkLength(type: GgmlType, n: number): void {
  const traits = GGML_TYPE_TRAITS[type];
  if (!traits) throw new Error(`unsupported ggml type ${type}`);
  if (n % traits.blockSize !== 0) {
    throw new Error(`${n} values is not a multiple of the ${traits.name} block size ${traits.blockSize}`);
  }
}

/** Encodes `x` (whole rows, length a multiple of the block size) as `type`. */
export function quantize(type: GgmlType, x: Float32Array): Uint8Array {
  checkLength(type, x.length);
  const traits = GGML_TYPE_TRAITS[type];
  const out = new Uint8Array((x.length / traits.blockSize) * traits.typeSize);
  switch (type) {
    case GgmlType.F32:
      new Float32Array(out.buffer).set(x); // little-endian hosts only (every Node.js target)
      break;
    case GgmlType.F16: {
      const h = new Uint16Array(out.buffer);
      for (let i = 0; i < x.length; i++) h[i] = fp32ToFp16Bits(x[i]);
      break;
    }
    case GgmlType.BF16: {
      const h = new Uint16Array(out.buffer);
      for (let i = 0; i < x.length; i++) h[i] = fp32ToBf16Bits(x[i]);
      break;
    }
    case GgmlType.Q8_0: quantizeQ8_0(x, out); break;
    case GgmlType.Q4_0: quantizeQ4_0(x, out); break;
    case GgmlType.Q4_K: quantizeQ4K(x, out); break;
    case GgmlType.Q6_K: quantizeQ6K(x, out); break;
    default: throw new Error(`unsupported ggml type ${type}`);
  }
  return out;
}

/** Decodes `n` values of `type` from `data`. */
export function dequantize(type: GgmlType, data: Uint8Array, n: number): Float32Array {
  checkLength(type, n);
  const traits = GGML_TYPE_TRAITS[type];
  const need = (n / traits.blockSize) * traits.typeSize;
  if (data.length < need) throw new Error(`${traits.name}: ${data.length} bytes, need ${need} for ${n} values`);
  const y = new Float32Array(n);
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  switch (type) {
    case GgmlType.F32:
      for (let i = 0; i < n; i++) y[i] = dv.getFloat32(4 * i, true);
      break;
    case GgmlType.F16:
      for (let i = 0; i < n; i++) y[i] = FP16_TABLE[dv.getUint16(2 * i, true)];
      break;
    case GgmlType.BF16:
      for (let i = 0; i < n; i++) y[i] = bf16BitsToFp32(dv.getUint16(2 * i, true));
      break;
    case GgmlType.Q8_0: dequantizeQ8_0(data, y); break;
    case GgmlType.Q4_0: dequantizeQ4_0(data, y); break;
    case GgmlType.Q4_K: dequantizeQ4K(data, y); break;
    case GgmlType.Q6_K: dequantizeQ6K(data, y); break;
    default: throw new Error(`unsupported ggml type ${type}`);
  }
  return y;
}
