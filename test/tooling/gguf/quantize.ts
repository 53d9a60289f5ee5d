// Every encoding the test fixtures write: the package's own (lib/gguf/quantize.ts: F32, F16, BF16, Q8_0, Q4_0)
// plus the K-quants Q4_K and Q6_K (quantize-k.ts), Q2_K, Q3_K, Q5_K (quantize-k-more.ts) and Q4_1, Q5_0, Q5_1,
// IQ4_NL, IQ4_XS (quantize-more.ts), which stay out of the shipped package.
import { GgmlType } from '../../../lib/gguf/constants.js';
import {
  CODECS, dequantize as dequantizeWith, quantize as quantizeWith, type TypeCodec,
} from '../../../lib/gguf/quantize.js';
import { dequantizeQ4K, dequantizeQ6K, quantizeQ4K, quantizeQ6K } from './quantize-k.js';
import { MORE_K_CODECS } from './quantize-k-more.js';
import { MORE_CODECS } from './quantize-more.js';

export const ALL_CODECS: ReadonlyMap<GgmlType, TypeCodec> = new Map<GgmlType, TypeCodec>([
  ...CODECS,
  [GgmlType.Q4_K, { encode: (x, out) => quantizeQ4K(x, out), decode: dequantizeQ4K }],
  [GgmlType.Q6_K, { encode: (x, out) => quantizeQ6K(x, out), decode: dequantizeQ6K }],
  [GgmlType.Q4_1, MORE_CODECS.Q4_1],
  [GgmlType.Q5_0, MORE_CODECS.Q5_0],
  [GgmlType.Q5_1, MORE_CODECS.Q5_1],
  [GgmlType.IQ4_NL, MORE_CODECS.IQ4_NL],
  [GgmlType.IQ4_XS, MORE_CODECS.IQ4_XS],
  [GgmlType.Q2_K, MORE_K_CODECS.Q2_K],
  [GgmlType.Q3_K, MORE_K_CODECS.Q3_K],
  [GgmlType.Q5_K, MORE_K_CODECS.Q5_K],
]);

/** Encodes `x` (whole rows, length a multiple of the block size) as `type`, K-quants included. */
export function quantize(type: GgmlType, x: Float32Array): Uint8Array {
  return quantizeWith(type, x, ALL_CODECS);
}

/** Decodes `n` values of `type` from `data`, K-quants included. */
export function dequantize(type: GgmlType, data: Uint8Array, n: number): Float32Array {
  return dequantizeWith(type, data, n, ALL_CODECS);
}
