// Every encoding the test fixtures write: the package's own (lib/gguf/quantize.ts: F32, F16, BF16, Q8_0, Q4_0)
// plus the K-quants Q4_K and Q6_K (quantize-k.ts), which stay out of the shipped package.
import { GgmlType } from '../../../lib/gguf/constants.js';
import {
  CODECS, dequantize as dequantizeWith, quantize as quantizeWith, type TypeCodec,
} from '../../../lib/gguf/quantize.js';
import { dequantizeQ4K, dequantizeQ6K, quantizeQ4K, quantizeQ6K } from './quantize-k.js';

export const ALL_CODECS: ReadonlyMap<GgmlType, TypeCodec> = new Map<GgmlType, TypeCodec>([
  ...CODECS,
  [GgmlType.Q4_K, { encode: (x, out) => quantizeQ4K(x, out), decode: dequantizeQ4K }],
  [GgmlType.Q6_K, { encode: (x, out) => quantizeQ6K(x, out), decode: dequantizeQ6K }],
]);

/** Encodes `x` (whole rows, length a multiple of the block size) as `type`, K-quants included. */
export function quantize(type: GgmlType, x: Float32Array): Uint8Array {
  return quantizeWith(type, x, ALL_CODECS);
}

/** Decodes `n` values of `type` from `data`, K-quants included. */
export function dequantize(type: GgmlType, data: Uint8Array, n: number): Float32Array {
  return dequantizeWith(type, data, n, ALL_CODECS);
}
