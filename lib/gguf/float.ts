// Float conversions shared by the quantizers: float32 <-> IEEE half and bfloat16, and ggml's nearest_int.
// Invariant: rounding matches ggml bit for bit (round to nearest, ties to even; NaN stays NaN).

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** IEEE half bits of `v`, round to nearest even (NaN stays NaN, overflow becomes inf). */
export function fp32ToFp16Bits(v: number): number {
  f32Scratch[0] = v;
  const x = u32Scratch[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 112; // rebias 127 -> 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) { // half subnormal (or zero): value = m * 2^-24
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (h & 1) !== 0)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1) !== 0)) h++; // a carry into the exponent is correct rounding
  return sign | h;
}

/** All 65536 half values as float32; index = half bits. */
export const FP16_TABLE: Float32Array = (() => {
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 0) t[h] = sign * mant * 2 ** -24;
    else if (exp === 0x1f) t[h] = mant ? NaN : sign * Infinity;
    else t[h] = sign * (1 + mant / 1024) * 2 ** (exp - 15);
  }
  return t;
})();

export function fp16BitsToFp32(h: number): number {
  return FP16_TABLE[h & 0xffff];
}

/** bfloat16 bits of `v`, round to nearest even; NaN is kept quiet (ggml_compute_fp32_to_bf16). */
export function fp32ToBf16Bits(v: number): number {
  f32Scratch[0] = v;
  const u = u32Scratch[0];
  if ((u & 0x7fffffff) >>> 0 > 0x7f800000) return ((u >>> 16) | 64) & 0xffff;
  return ((u + 0x7fff + ((u >>> 16) & 1)) / 65536) & 0xffff; // u + 0x8000 < 2^32 for every non-NaN u
}

export function bf16BitsToFp32(b: number): number {
  u32Scratch[0] = (b & 0xffff) << 16;
  return f32Scratch[0];
}

/**
 * Half-to-even rounding of a float32 value, like ggml's nearest_int (which reads the mantissa of v + 1.5 * 2^23:
 * NaN gives 0 and +-infinity -4194304, as happens when a block's scale overflows).
 */
export function nearestInt(v: number): number {
  if (!(v - v === 0)) return v !== v ? 0 : -4194304; // NaN, +-Infinity
  const r = Math.round(v);
  return r - v === 0.5 && (r & 1) !== 0 ? r - 1 : r;
}
