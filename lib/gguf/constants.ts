// GGUF / ggml constants shared by the writer, the quantizers and the fixture generator.
// Invariant: every number here equals the value in llama.cpp (ggml.h, llama.h, gguf-py/constants.py);
// these values are part of the file format and never change.

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32; // bytes
export const GGML_QUANT_VERSION = 2;

/** Metadata value types (gguf_type). */
export enum GgufValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

/** Tensor element types (ggml_type). Only the ones this project writes are listed. */
export enum GgmlType {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
}

/** Block geometry: elements per block and bytes per block (ggml_type_traits). */
export interface GgmlTypeTraits {
  name: string;
  blockSize: number; // elements
  typeSize: number; // bytes per block
}

export const GGML_TYPE_TRAITS: Record<GgmlType, GgmlTypeTraits> = {
  [GgmlType.F32]: { name: 'F32', blockSize: 1, typeSize: 4 },
  [GgmlType.F16]: { name: 'F16', blockSize: 1, typeSize: 2 },
  [GgmlType.BF16]: { name: 'BF16', blockSize: 1, typeSize: 2 },
  [GgmlType.Q8_0]: { name: 'Q8_0', blockSize: 32, typeSize: 2 + 32 }, // d: f16, qs: i8[32]
  [GgmlType.Q4_0]: { name: 'Q4_0', blockSize: 32, typeSize: 2 + 16 }, // d: f16, qs: u8[16]
  [GgmlType.Q4_1]: { name: 'Q4_1', blockSize: 32, typeSize: 2 + 2 + 16 }, // d, m: f16, qs: u8[16]
  [GgmlType.Q5_0]: { name: 'Q5_0', blockSize: 32, typeSize: 2 + 4 + 16 }, // d: f16, qh: u8[4], qs: u8[16]
  [GgmlType.Q5_1]: { name: 'Q5_1', blockSize: 32, typeSize: 2 + 2 + 4 + 16 }, // d, m: f16, qh: u8[4], qs: u8[16]
  [GgmlType.Q2_K]: { name: 'Q2_K', blockSize: 256, typeSize: 16 + 64 + 2 + 2 }, // scales[16], qs[64], d, dmin
  [GgmlType.Q3_K]: { name: 'Q3_K', blockSize: 256, typeSize: 32 + 64 + 12 + 2 }, // hmask[32], qs[64], scales[12], d
  [GgmlType.Q4_K]: { name: 'Q4_K', blockSize: 256, typeSize: 2 + 2 + 12 + 128 }, // d, dmin, scales[12], qs[128]
  [GgmlType.Q5_K]: { name: 'Q5_K', blockSize: 256, typeSize: 2 + 2 + 12 + 32 + 128 }, // d, dmin, scales[12], qh[32], qs[128]
  [GgmlType.Q6_K]: { name: 'Q6_K', blockSize: 256, typeSize: 128 + 64 + 16 + 2 }, // ql[128], qh[64], scales[16], d
  [GgmlType.IQ4_NL]: { name: 'IQ4_NL', blockSize: 32, typeSize: 2 + 16 }, // d: f16, qs: u8[16]
  [GgmlType.IQ4_XS]: { name: 'IQ4_XS', blockSize: 256, typeSize: 2 + 2 + 4 + 128 }, // d, scales_h, scales_l[4], qs[128]
};

export function ggmlTypeName(type: GgmlType): string {
  const traits = GGML_TYPE_TRAITS[type];
  if (!traits) throw new Error(`unknown ggml type ${type}`);
  return traits.name;
}

/** Bytes of one row of `n` elements; throws when n is not a multiple of the block size. */
export function ggmlRowSize(type: GgmlType, n: number): number {
  const traits = GGML_TYPE_TRAITS[type];
  if (!traits) throw new Error(`unknown ggml type ${type}`);
  if (!Number.isSafeInteger(n) || n < 0 || n % traits.blockSize !== 0) {
    throw new Error(`row length ${n} is not a multiple of the ${traits.name} block size ${traits.blockSize}`);
  }
  return (n / traits.blockSize) * traits.typeSize;
}

/** Bytes of a whole tensor with dimensions `ne` (ne[0] = row length, GGUF order). */
export function ggmlTensorBytes(type: GgmlType, ne: readonly number[]): number {
  if (ne.length === 0) throw new Error('tensor needs at least one dimension');
  let rows = 1;
  for (let i = 1; i < ne.length; i++) {
    if (!Number.isSafeInteger(ne[i]) || ne[i] < 0) throw new Error(`bad tensor dimension ${ne[i]}`);
    rows *= ne[i];
  }
  const bytes = ggmlRowSize(type, ne[0]) * rows;
  if (!Number.isSafeInteger(bytes)) throw new Error('tensor size overflows');
  return bytes;
}

/** llama_ftype: the `general.file_type` value. */
export enum LlamaFileType {
  ALL_F32 = 0,
  MOSTLY_F16 = 1,
  MOSTLY_Q4_0 = 2,
  MOSTLY_Q4_1 = 3,
  MOSTLY_Q8_0 = 7,
  MOSTLY_Q5_0 = 8,
  MOSTLY_Q5_1 = 9,
  MOSTLY_Q2_K = 10,
  MOSTLY_Q3_K_S = 11,
  MOSTLY_Q3_K_M = 12,
  MOSTLY_Q4_K_M = 15,
  MOSTLY_Q5_K_S = 16,
  MOSTLY_Q5_K_M = 17,
  MOSTLY_Q6_K = 18,
  MOSTLY_IQ4_NL = 25,
  MOSTLY_IQ4_XS = 30,
  MOSTLY_BF16 = 32,
}

/** tokenizer.ggml.token_type values (llama_token_type / gguf TokenType). */
export enum TokenType {
  NORMAL = 1,
  UNKNOWN = 2,
  CONTROL = 3,
  USER_DEFINED = 4,
  UNUSED = 5,
  BYTE = 6,
}
