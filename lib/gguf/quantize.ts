// Float32 -> ggml tensor encodings (F32, F16, BF16, Q8_0, Q4_0) and back: what the package itself writes
// (the demo model, lib/demo-model.ts). The K-quant encoders (Q4_K, Q6_K: searches over scales) are test
// tooling (test/tooling/gguf), which passes its larger codec table to quantize() / dequantize().
// Invariant: output bytes follow ggml's block layouts exactly (ggml-common.h), little-endian; the Q8_0/Q4_0
// encoders follow quantize_row_*_ref step by step (float32 rounding included), F16 and BF16 round to nearest
// even like GGML_FP32_TO_FP16 / GGML_FP32_TO_BF16.
import { GGML_TYPE_TRAITS, GgmlType } from './constants.js';
import { FP16_TABLE, bf16BitsToFp32, fp32ToBf16Bits, fp32ToFp16Bits } from './float.js';

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

/** Encoder and decoder of one ggml type; both work on whole blocks (lengths are checked before). */
export interface TypeCodec {
  encode(x: Float32Array, out: Uint8Array): void;
  decode(data: Uint8Array, y: Float32Array): void;
}

/** A 16-bit float type (F16, BF16) from its conversions to and from the bits. */
function halfCodec(toBits: (v: number) => number, fromBits: (h: number) => number): TypeCodec {
  return {
    encode: (x, out) => {
      const h = new Uint16Array(out.buffer, out.byteOffset, x.length);
      for (let i = 0; i < x.length; i++) h[i] = toBits(x[i]);
    },
    decode: (data, y) => {
      const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
      for (let i = 0; i < y.length; i++) y[i] = fromBits(dv.getUint16(2 * i, true));
    },
  };
}

/** The encodings of the package (every Node.js target is little-endian, so F32 is a plain copy). */
export const CODECS: ReadonlyMap<GgmlType, TypeCodec> = new Map<GgmlType, TypeCodec>([
  [GgmlType.F32, {
    encode: (x, out) => new Float32Array(out.buffer, out.byteOffset, x.length).set(x),
    decode: (data, y) => {
      const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
      for (let i = 0; i < y.length; i++) y[i] = dv.getFloat32(4 * i, true);
    },
  }],
  [GgmlType.F16, halfCodec(fp32ToFp16Bits, (h) => FP16_TABLE[h])],
  [GgmlType.BF16, halfCodec(fp32ToBf16Bits, bf16BitsToFp32)],
  [GgmlType.Q8_0, { encode: quantizeQ8_0, decode: dequantizeQ8_0 }],
  [GgmlType.Q4_0, { encode: quantizeQ4_0, decode: dequantizeQ4_0 }],
]);

function codecFor(type: GgmlType, n: number, codecs: ReadonlyMap<GgmlType, TypeCodec>): TypeCodec {
  const traits = GGML_TYPE_TRAITS[type];
  const codec = codecs.get(type);
  if (!traits || !codec) throw new Error(`unsupported ggml type ${traits ? traits.name : type}`);
  if (n % traits.blockSize !== 0) {
    throw new Error(`${n} values is not a multiple of the ${traits.name} block size ${traits.blockSize}`);
  }
  return codec;
}

/** Encodes `x` (whole rows, length a multiple of the block size) as `type`. */
export function quantize(type: GgmlType, x: Float32Array, codecs: ReadonlyMap<GgmlType, TypeCodec> = CODECS): Uint8Array {
  const codec = codecFor(type, x.length, codecs);
  const traits = GGML_TYPE_TRAITS[type];
  const out = new Uint8Array((x.length / traits.blockSize) * traits.typeSize);
  codec.encode(x, out);
  return out;
}

/** Decodes `n` values of `type` from `data`. */
export function dequantize(type: GgmlType, data: Uint8Array, n: number, codecs: ReadonlyMap<GgmlType, TypeCodec> = CODECS): Float32Array {
  const codec = codecFor(type, n, codecs);
  const traits = GGML_TYPE_TRAITS[type];
  const need = (n / traits.blockSize) * traits.typeSize;
  if (data.length < need) throw new Error(`${traits.name}: ${data.length} bytes, need ${need} for ${n} values`);
  const y = new Float32Array(n);
  codec.decode(data, y);
  return y;
}
