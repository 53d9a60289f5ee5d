// GGUF writer and quantizers: write files, read them back with a minimal independent reader, check
// alignment and values; quantizer golden bytes (recorded from ggml's C functions) and round trips.
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GGML_TYPE_TRAITS, GgmlType, GgufValueType } from '../lib/gguf/constants.js';
import { bf16BitsToFp32, fp16BitsToFp32, fp32ToBf16Bits, fp32ToFp16Bits } from '../lib/gguf/float.js';
import { GgufWriter, type GgufArray } from '../lib/gguf/writer.js';
import { Rng } from '../lib/random-model/random.js';
import { dequantize, quantize } from './tooling/gguf/quantize.js';

// ---- minimal GGUF reader (independent of the writer's code) ----
interface ReadTensor { name: string; ne: number[]; type: number; offset: number }
interface ReadFile { version: number; kv: Map<string, { type: number; value: unknown }>; tensors: ReadTensor[]; dataStart: number }

function readGguf(buf: Buffer): ReadFile {
  let p = 0;
  const u32 = () => { const v = buf.readUInt32LE(p); p += 4; return v; };
  const u64 = () => { const v = buf.readBigUInt64LE(p); p += 8; return Number(v); };
  const str = () => { const n = u64(); const s = buf.toString('utf8', p, p + n); p += n; return s; };
  const value = (type: number): unknown => {
    switch (type) {
      case 0: return buf.readUInt8(p++);
      case 1: return buf.readInt8(p++);
      case 2: { const v = buf.readUInt16LE(p); p += 2; return v; }
      case 3: { const v = buf.readInt16LE(p); p += 2; return v; }
      case 4: return u32();
      case 5: { const v = buf.readInt32LE(p); p += 4; return v; }
      case 6: { const v = buf.readFloatLE(p); p += 4; return v; }
      case 7: return buf.readUInt8(p++) !== 0;
      case 8: return str();
      case 9: { const et = u32(); const n = u64(); const out = []; for (let i = 0; i < n; i++) out.push(value(et)); return { type: et, values: out }; }
      case 10: { const v = buf.readBigUInt64LE(p); p += 8; return v; }
      case 11: { const v = buf.readBigInt64LE(p); p += 8; return v; }
      case 12: { const v = buf.readDoubleLE(p); p += 8; return v; }
      default: throw new Error(`bad type ${type}`);
    }
  };
  if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error('bad magic');
  p = 4;
  const version = u32();
  const nTensors = u64();
  const nKv = u64();
  const kv = new Map<string, { type: number; value: unknown }>();
  for (let i = 0; i < nKv; i++) { const k = str(); const type = u32(); kv.set(k, { type, value: value(type) }); }
  const tensors: ReadTensor[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = str(); const nd = u32(); const ne = []; for (let d = 0; d < nd; d++) ne.push(u64());
    tensors.push({ name, ne, type: u32(), offset: u64() });
  }
  const align = (kv.get('general.alignment')?.value as number | undefined) ?? 32;
  const dataStart = nTensors > 0 ? Math.ceil(p / align) * align : p;
  return { version, kv, tensors, dataStart };
}

const tmp = mkdtempSync(join(tmpdir(), 'spindle-gguf-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

function bytesOf(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7) & 0xff;
  return b;
}

t.test('every metadata type round-trips', async (t) => {
  const w = new GgufWriter();
  w.addString('general.architecture', 'llama');
  w.addUint8('u8', 255).addInt8('i8', -128).addUint16('u16', 65535).addInt16('i16', -32768);
  w.addUint32('u32', 0xffffffff).addInt32('i32', -2147483648).addFloat32('f32', 1.5).addFloat64('f64', Math.PI);
  w.addBool('yes', true).addBool('no', false);
  w.addUint64('u64', (1n << 64n) - 1n).addInt64('i64', -(1n << 63n));
  w.addString('utf8', 'héllo wörld — 日本語 🦙');
  w.addArray('arr.str', GgufValueType.STRING, ['a', '', 'Ġhello', '<|eot_id|>']);
  w.addArray('arr.i32', GgufValueType.INT32, new Int32Array([1, -2, 3]));
  w.addArray('arr.f32', GgufValueType.FLOAT32, new Float32Array([0.5, -1e-3, 1e30]));
  w.addArray('arr.bool', GgufValueType.BOOL, [true, false]);
  w.addArray('arr.empty', GgufValueType.UINT32, []);
  w.addArray('arr.nested', GgufValueType.ARRAY, [{ type: GgufValueType.UINT8, values: [1, 2] }, { type: GgufValueType.STRING, values: ['x'] }]);
  const file = join(tmp, 'kv.gguf');
  await w.writeFile(file, () => new Uint8Array(0));
  const buf = readFileSync(file);
  const r = readGguf(buf);
  t.equal(r.version, 3);
  t.equal(r.tensors.length, 0);
  t.equal(buf.length, r.dataStart, 'no padding after the header when there are no tensors');
  const v = (k: string) => r.kv.get(k)?.value;
  t.same([v('u8'), v('i8'), v('u16'), v('i16'), v('u32'), v('i32'), v('f32')], [255, -128, 65535, -32768, 0xffffffff, -2147483648, 1.5]);
  t.equal(v('f64'), Math.PI);
  t.same([v('yes'), v('no')], [true, false]);
  t.equal(v('u64'), (1n << 64n) - 1n);
  t.equal(v('i64'), -(1n << 63n));
  t.equal(v('utf8'), 'héllo wörld — 日本語 🦙');
  t.same(v('arr.str'), { type: GgufValueType.STRING, values: ['a', '', 'Ġhello', '<|eot_id|>'] });
  t.same(v('arr.i32'), { type: GgufValueType.INT32, values: [1, -2, 3] });
  t.same((v('arr.f32') as GgufArray).values, [0.5, Math.fround(-1e-3), Math.fround(1e30)]);
  t.same(v('arr.bool'), { type: GgufValueType.BOOL, values: [true, false] });
  t.same(v('arr.empty'), { type: GgufValueType.UINT32, values: [] });
  t.same(v('arr.nested'), {
    type: GgufValueType.ARRAY,
    values: [{ type: GgufValueType.UINT8, values: [1, 2] }, { type: GgufValueType.STRING, values: ['x'] }],
  });
  t.same([...r.kv.keys()].slice(0, 3), ['general.architecture', 'u8', 'i8'], 'keys keep insertion order');
});

t.test('tensor table, alignment and data', async (t) => {
  for (const alignment of [32, 64, 256]) {
    const w = new GgufWriter({ alignment });
    w.addString('general.architecture', 'llama');
    const specs: Array<[string, number[], GgmlType]> = [
      ['a', [3], GgmlType.F32], ['b', [5, 3], GgmlType.F16], ['c', [64, 2], GgmlType.Q8_0],
      ['d', [32, 1, 3], GgmlType.Q4_0], ['e', [256, 2], GgmlType.Q4_K], ['f', [256], GgmlType.Q6_K], ['g', [7], GgmlType.BF16],
    ];
    const data: Uint8Array[] = [];
    for (const [name, ne, type] of specs) {
      const info = w.addTensor(name, ne, type);
      data.push(bytesOf(info.nbytes, data.length));
    }
    const file = join(tmp, `t${alignment}.gguf`);
    // stream: the first tensors as chunk iterables, the rest as single buffers
    const written = await w.writeFile(file, (info, i) => (i % 2 === 0 ? [data[i].subarray(0, 1), data[i].subarray(1)] : data[i]));
    const buf = readFileSync(file);
    t.equal(written, buf.length, 'writeFile returns the file size');
    t.equal(buf.length, w.fileSize());
    t.ok(w.toBuffer(data).equals(buf), 'in-memory and streamed files are identical');
    const r = readGguf(buf);
    t.equal(r.kv.has('general.alignment'), alignment !== 32, 'general.alignment written only when not 32');
    t.equal(r.dataStart % alignment, 0);
    let expected = 0;
    r.tensors.forEach((ti, i) => {
      const [name, ne, type] = specs[i];
      t.same([ti.name, ti.ne, ti.type], [name, ne, type]);
      t.equal(ti.offset, expected, `${name} offset`);
      t.equal(ti.offset % alignment, 0);
      const start = r.dataStart + ti.offset;
      t.ok(buf.subarray(start, start + data[i].length).equals(data[i]), `${name} bytes`);
      expected += Math.ceil(data[i].length / alignment) * alignment;
    });
    t.equal(buf.length, r.dataStart + expected, 'file ends after the last padded tensor');
  }
});

t.test('writer rejects bad input and leaves no partial file', async (t) => {
  const w = new GgufWriter();
  w.addUint32('x', 1);
  t.throws(() => w.addUint32('x', 2), /duplicate metadata key x/);
  t.throws(() => w.addUint8('u8', 256), /does not fit UINT8/);
  t.throws(() => w.addInt32('i', 1.5), /does not fit INT32/);
  t.throws(() => w.addUint64('u', -1), /does not fit UINT64/);
  t.throws(() => w.addUint32('general.alignment', 48), /not a power of two/);
  t.throws(() => w.add('s', GgufValueType.STRING, 5), /expected a string/);
  t.throws(() => w.addTensor('q', [100, 2], GgmlType.Q4_K), /not a multiple of the Q4_K block size 256/);
  w.addTensor('t', [4], GgmlType.F32);
  t.throws(() => w.addTensor('t', [4], GgmlType.F32), /duplicate tensor name t/);
  t.throws(() => w.addUint32('general.alignment', 64), /before tensors/);
  const file = join(tmp, 'bad.gguf');
  await t.rejects(w.writeFile(file, () => new Uint8Array(15)), /got 15 bytes of data, expected 16/);
  t.notOk(existsSync(file), 'partial file removed');
  await t.rejects(w.writeFile(file, () => new Uint8Array(17)), /more than 16 bytes/);
  t.notOk(existsSync(file));
});

// ---- quantizers ----
/** Deterministic test input: 256-value blocks of four distributions (uniform, heavy-tailed, positive, sparse). */
function goldenInput(n: number): Float32Array {
  let s = 0x12345678 >>> 0;
  const next = () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 4294967296; };
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const kind = (i >> 8) % 4;
    const u = next();
    x[i] = kind === 0 ? (u - 0.5) * 2 : kind === 1 ? Math.tan((u - 0.5) * 3) : kind === 2 ? u * 3 + 0.25 : (u < 0.85 ? 0 : -u * 5);
  }
  return x;
}

t.test('quantized bytes equal ggml reference quantizers', async (t) => {
  // SHA-256 of the output of ggml's quantize_row_{q8_0,q4_0,q4_K,q6_K}_ref (ggml-quants.c, compiled from the
  // llama.cpp checkout) and of numpy's float16 / gguf-py's bf16 on goldenInput(16384)
  const golden: Array<[GgmlType, string]> = [
    [GgmlType.Q8_0, '0d4513305ba7c4610de8df47e9129a5347be4f33accd3f8a4e366fbcd8e32343'],
    [GgmlType.Q4_0, 'cec2a37b0a9182596dafb53fde3534bd82f52596a218dee6ec55fb913726eec2'],
    [GgmlType.Q4_K, '39b0ebb539ccda0cd6cbb8a0ac349c86d23c6d1da3390d049b904453c6fcbb81'],
    [GgmlType.Q6_K, 'b4d2048f930d8de3f3fbb442ba9de40af17e2ee2a1e0b4d48f025aea96303c90'],
    [GgmlType.F16, 'b1b99f7d73e55ee3db358cbd0f467f41766f6e6e1fb4634a377405a888619c1d'],
    [GgmlType.BF16, '5b7695050a9b464abce043f77eaa2e569ad2e2d10b9f81335a3c1a4773f387d7'],
  ];
  const x = goldenInput(256 * 64);
  for (const [type, hash] of golden) {
    const q = quantize(type, x);
    const traits = GGML_TYPE_TRAITS[type];
    t.equal(q.length, (x.length / traits.blockSize) * traits.typeSize, `${traits.name} size`);
    t.equal(createHash('sha256').update(q).digest('hex'), hash, `${traits.name} bytes`);
  }
});

/** 256 * 64 values of each of eleven distributions that reach every branch of the K-quant searches. */
function stressInput(): Float32Array {
  const n = 256 * 64;
  const kinds: Array<(g: number, u: number, i: number) => number> = [
    (g) => 0.02 * g, // fixture-like weights
    (_g, u) => 2 * u - 1,
    (_g, u) => 3 * u + 0.25, // all positive: the Q4_K min clamps to 0
    (_g, u) => -3 * u - 0.25,
    (_g, u) => Math.tan((u - 0.5) * 3.1), // heavy tails
    (g, u) => (u < 0.85 ? 0 : g), // sparse
    (g) => 1 + 1e-6 * g, // nearly constant
    (_g, u) => (u < 0.5 ? -1 : 1), // two values
    (g) => 100 + 0.01 * g, // small spread on a large offset
    (g, _u, i) => g * 10 ** (((i >> 4) % 9) - 4), // scales 1e-4..1e4 within a block
    (g) => 1e12 * g, // block scales overflow half precision (ggml's NaN / inf rounding)
  ];
  const x = new Float32Array(kinds.length * n);
  const g = new Float32Array(n);
  kinds.forEach((f, k) => {
    const rng = new Rng(7, `stress${k}`);
    rng.fillNormal(g, 1, 0);
    for (let i = 0; i < n; i++) x[k * n + i] = f(g[i], rng.uniform(), i);
  });
  return x;
}

t.test('quantized bytes equal ggml on distributions that reach every search branch', async (t) => {
  // SHA-256 of ggml_quantize_chunk (libggml-base.so of node-llama-cpp's prebuilt llama.cpp, no imatrix, as
  // llama-quantize calls it) of stressInput(); the K-quant searches skip steps they prove cannot win, and
  // this checks that they still choose exactly ggml's levels, scales and mins
  const golden: Array<[GgmlType, string]> = [
    [GgmlType.Q8_0, '273e69aa0fec6d61b1cb59ef268f531ad5c951e93340a212a5501d9c773466c0'],
    [GgmlType.Q4_0, 'c0785278e72ed629a062d80769fd78c837861bce0b52b4f334bca8be8d103830'],
    [GgmlType.Q4_K, '673265e50fcffc1ec6c2744812eca96cdfd2e06bfb874b2b90f595a8fddd13c5'],
    [GgmlType.Q6_K, '9281f9959c5ed489e558356e32b4a48051d31a059c01f066d2b9f546b6272166'],
    [GgmlType.F16, 'bb6bd548ae226cbf966cb99ddd9971379ddb897c421c89896dd49c438f471995'],
    [GgmlType.BF16, '725c324e96d6e237ea8ab23eb7e692c20d8f072171a2c108d1e6a46d30ebd0ad'],
  ];
  const x = stressInput();
  for (const [type, hash] of golden) {
    t.equal(createHash('sha256').update(quantize(type, x)).digest('hex'), hash, `${GGML_TYPE_TRAITS[type].name} bytes`);
  }
  for (const type of [GgmlType.Q4_K, GgmlType.Q6_K]) {
    const bad = new Float32Array(256);
    bad[100] = NaN;
    t.throws(() => quantize(type, bad), /cannot quantize the non-finite value NaN/, `${GGML_TYPE_TRAITS[type].name} rejects NaN`);
    bad[100] = -Infinity;
    t.throws(() => quantize(type, bad), /non-finite value -Infinity/, `${GGML_TYPE_TRAITS[type].name} rejects infinity`);
  }
});

t.test('half and bfloat16 conversions round to nearest even', async (t) => {
  const f16: Array<[number, number]> = [
    [0, 0], [-0, 0x8000], [1, 0x3c00], [-2, 0xc000], [0.1, 0x2e66], [65504, 0x7bff], [65519, 0x7bff],
    [65520, 0x7c00], [Infinity, 0x7c00], [-Infinity, 0xfc00], [2 ** -24, 0x0001], [2 ** -25, 0x0000],
    [3 * 2 ** -25, 0x0002], [2 ** -14, 0x0400], [1 + 2 ** -11, 0x3c00], [1 + 3 * 2 ** -11, 0x3c02],
  ];
  for (const [v, bits] of f16) t.equal(fp32ToFp16Bits(v), bits, `f16(${v})`);
  t.ok(Number.isNaN(fp16BitsToFp32(fp32ToFp16Bits(NaN))), 'f16 NaN stays NaN');
  t.equal(fp16BitsToFp32(0x3555), 0.333251953125);
  const bf16: Array<[number, number]> = [
    [1, 0x3f80], [-1, 0xbf80], [1 + 2 ** -8, 0x3f80], [1 + 3 * 2 ** -8, 0x3f82], [3.140625, 0x4049], [Infinity, 0x7f80],
  ];
  for (const [v, bits] of bf16) t.equal(fp32ToBf16Bits(v), bits, `bf16(${v})`);
  t.ok(Number.isNaN(bf16BitsToFp32(fp32ToBf16Bits(NaN))), 'bf16 NaN stays NaN');
  t.equal(bf16BitsToFp32(0x4049), 3.140625);
});

// Round trip y of x: the worst block's max |y - x| / max |x| (per 256 values) and the relative RMSE.
function roundTripError(x: Float32Array, y: Float32Array): { worst: number; rmse: number } {
  let se = 0, sx = 0, worst = 0;
  for (let b = 0; b < x.length; b += 256) {
    let amax = 0, emax = 0;
    for (let i = b; i < b + 256; i++) {
      amax = Math.max(amax, Math.abs(x[i]));
      emax = Math.max(emax, Math.abs(y[i] - x[i]));
      se += (y[i] - x[i]) ** 2;
      sx += x[i] ** 2;
    }
    worst = Math.max(worst, amax > 0 ? emax / amax : emax);
  }
  return { worst, rmse: Math.sqrt(se / sx) };
}

t.test('quantize/dequantize round trips stay within bounds', async (t) => {
  const x = goldenInput(256 * 64);
  // max |error| / max |x| over each block, and overall relative RMSE
  const bounds: Array<[GgmlType, number, number]> = [
    // F16 / BF16: half an ulp (2^-11, 2^-8); Q8_0: d/2 = amax/254 plus the f16 rounding of d; Q4_0: the side
    // opposite the max only reaches 7d = 7/8 amax, so up to amax/8; K-quants: empirical (scale search)
    [GgmlType.F32, 0, 0], [GgmlType.F16, 2 ** -11, 5e-4], [GgmlType.BF16, 2 ** -8, 4e-3], [GgmlType.Q8_0, 1 / 254 + 2 ** -10, 8e-3],
    [GgmlType.Q4_0, 1 / 8 + 2 ** -8, 0.12], [GgmlType.Q4_K, 0.1, 0.1], [GgmlType.Q6_K, 0.025, 0.03],
  ];
  for (const [type, blockBound, rmseBound] of bounds) {
    const name = GGML_TYPE_TRAITS[type].name;
    const { worst, rmse } = roundTripError(x, dequantize(type, quantize(type, x), x.length));
    t.ok(worst <= blockBound, `${name}: worst block error ${worst.toExponential(2)} <= ${blockBound}`);
    t.ok(rmse <= rmseBound, `${name}: relative RMSE ${rmse.toExponential(2)} <= ${rmseBound}`);
  }
  const zeros = new Float32Array(512);
  for (const type of [GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_K, GgmlType.Q6_K]) {
    t.same([...dequantize(type, quantize(type, zeros), 512)].filter((v) => v !== 0), [], `${GGML_TYPE_TRAITS[type].name} keeps zeros`);
  }
  t.throws(() => quantize(GgmlType.Q8_0, new Float32Array(33)), /not a multiple of the Q8_0 block size 32/);
  t.throws(() => quantize(GgmlType.Q5_K, new Float32Array(32)), /not a multiple of the Q5_K block size 256/);
  t.throws(() => dequantize(GgmlType.Q6_K, new Uint8Array(10), 256), /need 210/);
});

t.test('the further fixture encodings round-trip within bounds and keep zeros', async (t) => {
  const x = goldenInput(256 * 64);
  // max |error| / max |x| per 256 values, and relative RMSE. Q4_1 / Q5_1: half a step of range / 15 (31), range
  // <= 2 amax, plus the f16 rounding of d and m; Q5_0: the side opposite the max reaches 15d = 15/16 amax, so up
  // to amax/16 (as Q4_0's 1/8); every RMSE, and the block errors of the others (plain scales, nearest level):
  // measured on this input, plus margin
  const bounds: Array<[GgmlType, number, number]> = [
    [GgmlType.Q4_1, 1 / 15 + 2 ** -7, 0.1], [GgmlType.Q5_0, 1 / 16 + 2 ** -8, 0.06], [GgmlType.Q5_1, 1 / 31 + 2 ** -8, 0.05],
    [GgmlType.IQ4_NL, 0.2, 0.1], [GgmlType.Q2_K, 0.5, 0.4], [GgmlType.Q3_K, 0.3, 0.2], [GgmlType.Q5_K, 0.05, 0.05],
    [GgmlType.IQ4_XS, 0.2, 0.1],
  ];
  for (const [type, blockBound, rmseBound] of bounds) {
    const name = GGML_TYPE_TRAITS[type].name;
    const q = quantize(type, x);
    t.equal(q.length, (x.length / GGML_TYPE_TRAITS[type].blockSize) * GGML_TYPE_TRAITS[type].typeSize, `${name} size`);
    const { worst, rmse } = roundTripError(x, dequantize(type, q, x.length));
    t.ok(worst <= blockBound, `${name}: worst block error ${worst.toExponential(2)} <= ${blockBound}`);
    t.ok(rmse <= rmseBound, `${name}: relative RMSE ${rmse.toExponential(2)} <= ${rmseBound}`);
    const zeros = new Float32Array(512);
    t.same([...dequantize(type, quantize(type, zeros), 512)].filter((v) => v !== 0), [], `${name} keeps zeros`);
  }
});
