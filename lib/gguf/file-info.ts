// A GGUF file's header facts, read without loading the model: architecture, general.file_type, size label,
// parameter count (sum of tensor elements), token types, tensor extents. Used by `spindle bench` (lib/bench),
// the Ollama routes (/api/tags, /api/show) and bench/cpu-compare.mjs.
// Invariant: every length read from the file is checked against the file size before it is used, so a
// truncated or hostile file gives a ModelFileError naming the problem, never a crash or a huge allocation;
// only the header is read (a chunk at a time), never the tensor data. A split model (split.ts) is read from its
// first file: the counts, bytes and tensors are all its files' together.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { ModelFileError } from './model-file-error.js';
import { splitSiblings } from './split.js';

export { ModelFileError };

export interface ModelFileInfo {
  path: string;
  fileBytes: number; // bytes, the whole file (a split model: all its files)
  files: string[]; // the model's files: [path], or a split model's, first to last
  arch: string;
  type: string | null; // general.type: 'model', 'adapter' (a LoRA adapter), ...; null when absent
  name: string | null; // general.name
  sizeLabel: string | null; // general.size_label, e.g. '8B'
  license: string | null; // general.license, e.g. 'apache-2.0' (a name or the text)
  fileType: number | null; // general.file_type (llama_ftype)
  fileTypeName: string | null; // 'Q4_K - Medium', as llama.cpp's llama_ftype_name
  nParams: number; // elements over all tensors
  nTensors: number;
  weightBytes: number; // bytes of the tensor data section (file size minus the aligned header)
  ctxTrain: number | null; // {arch}.context_length
  tokenTypes: Int32Array | null; // tokenizer.ggml.token_type, [n_vocab]; null when absent
  tensors: TensorExtent[]; // in file order (a split model: file by file)
  expertCount: number | null; // {arch}.expert_count (MoE)
  expertUsedCount: number | null; // {arch}.expert_used_count (MoE)
  sampling: GgufSampling; // general.sampling.*: the model maker's recommended sampling ({} when absent)
}

/**
 * The recommended sampling parameters llama.cpp's convert_hf_to_gguf.py copies from the model's
 * generation_config.json into general.sampling.* (llama.cpp applies them under the user's own settings), in
 * Spindle's names: the ones vLLM takes from a generation config (temperature, top_k, top_p, min_p, repetition
 * penalty; not penalty_last_n, xtc or mirostat). A key the file lacks, or holds as a non-number, is absent; so is a
 * value equal to Hugging Face's own default (temperature 1, top_k 50, top_p 1, repetition penalty 1), which vLLM
 * drops too (generation config's to_diff_dict). Ranges are the caller's to check (EngineCore.modelSampling).
 */
export interface GgufSampling {
  temperature?: number; // general.sampling.temp
  topK?: number; // general.sampling.top_k
  topP?: number; // general.sampling.top_p
  minP?: number; // general.sampling.min_p
  repetitionPenalty?: number; // general.sampling.penalty_repeat
}

export interface TensorExtent {
  name: string;
  offset: number; // bytes, from the start of the tensor data section of its file
  bytes: number; // bytes up to the next tensor's data (or the end of the file), alignment padding included
}

/** llama_ftype -> llama.cpp's display name (llama_ftype_name). */
const FTYPE_NAMES: Record<number, string> = {
  0: 'all F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 7: 'Q8_0', 8: 'Q5_0', 9: 'Q5_1', 10: 'Q2_K - Medium',
  11: 'Q3_K - Small', 12: 'Q3_K - Medium', 13: 'Q3_K - Large', 14: 'Q4_K - Small', 15: 'Q4_K - Medium',
  16: 'Q5_K - Small', 17: 'Q5_K - Medium', 18: 'Q6_K', 19: 'IQ2_XXS - 2.0625 bpw', 20: 'IQ2_XS - 2.3125 bpw',
  21: 'Q2_K - Small', 22: 'IQ3_XS - 3.3 bpw', 23: 'IQ3_XXS - 3.0625 bpw', 24: 'IQ1_S - 1.5625 bpw',
  25: 'IQ4_NL - 4.5 bpw', 26: 'IQ3_S - 3.4375 bpw', 27: 'IQ3_S mix - 3.66 bpw', 28: 'IQ2_S - 2.5 bpw',
  29: 'IQ2_M - 2.7 bpw', 30: 'IQ4_XS - 4.25 bpw', 31: 'IQ1_M - 1.75 bpw', 32: 'BF16', 36: 'TQ1_0 - 1.69 bpw ternary',
  37: 'TQ2_0 - 2.06 bpw ternary', 38: 'MXFP4 MoE',
};
const FTYPE_GUESSED = 1024;

export function fileTypeName(ftype: number): string {
  const name = FTYPE_NAMES[ftype & ~FTYPE_GUESSED] ?? `unknown file type ${ftype}`;
  return ftype & FTYPE_GUESSED ? `(guessed) ${name}` : name;
}

const CHUNK = 1 << 20; // bytes read per refill

/** Sequential little-endian reads over a file descriptor, refilled a chunk at a time. */
class Cursor {
  #buf = Buffer.alloc(0);
  #bufStart = 0; // file offset of #buf[0]
  pos = 0; // file offset

  constructor(private readonly fd: number, readonly size: number) {}

  #need(n: number, what: string): number {
    if (n > this.size - this.pos) throw new ModelFileError(`truncated GGUF header: ${what} runs past the end of the file`);
    const at = this.pos - this.#bufStart;
    if (at + n <= this.#buf.length) return at;
    const len = Math.min(Math.max(n, CHUNK), this.size - this.pos);
    this.#buf = Buffer.alloc(len);
    const got = readSync(this.fd, this.#buf, 0, len, this.pos);
    if (got !== len) throw new ModelFileError(`short read at byte ${this.pos} (${got} of ${len})`);
    this.#bufStart = this.pos;
    return 0;
  }

  u16(what: string): number { const at = this.#need(2, what); this.pos += 2; return this.#buf.readUInt16LE(at); }
  u32(what: string): number { const at = this.#need(4, what); this.pos += 4; return this.#buf.readUInt32LE(at); }
  i32(what: string): number { const at = this.#need(4, what); this.pos += 4; return this.#buf.readInt32LE(at); }
  f32(what: string): number { const at = this.#need(4, what); this.pos += 4; return this.#buf.readFloatLE(at); }
  f64(what: string): number { const at = this.#need(8, what); this.pos += 8; return this.#buf.readDoubleLE(at); }
  /** A 64-bit integer as a number (exact up to 2^53; beyond, the nearest double). */
  i64(what: string, unsigned: boolean): number {
    const at = this.#need(8, what);
    this.pos += 8;
    return Number(unsigned ? this.#buf.readBigUInt64LE(at) : this.#buf.readBigInt64LE(at));
  }

  /** A u64 that must fit a safe integer (counts, lengths, dimensions). */
  u64(what: string): number {
    const at = this.#need(8, what);
    this.pos += 8;
    const v = this.#buf.readBigUInt64LE(at);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new ModelFileError(`${what} is too large (${v})`);
    return Number(v);
  }

  /** A string of at most `maxLen` bytes (keys, names; longer values are skipped, never read). */
  string(what: string, maxLen = 1 << 16): string {
    const len = this.u64(`${what} length`);
    if (len > maxLen) throw new ModelFileError(`${what} is ${len} bytes long (at most ${maxLen} expected)`);
    const at = this.#need(len, what);
    this.pos += len;
    return this.#buf.toString('utf8', at, at + len);
  }

  skip(n: number, what: string): void {
    if (n > this.size - this.pos) throw new ModelFileError(`truncated GGUF header: ${what} runs past the end of the file`);
    this.pos += n;
  }
}

// gguf_type -> bytes of one scalar (0: not a fixed-size scalar)
const SCALAR_BYTES = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
const T_UINT16 = 2, T_UINT32 = 4, T_INT32 = 5, T_FLOAT32 = 6, T_STRING = 8, T_ARRAY = 9, T_UINT64 = 10, T_INT64 = 11, T_FLOAT64 = 12;

type Value = number | string | Int32Array | null; // null: a value this reader does not keep

function readValue(c: Cursor, type: number, key: string, keep: boolean): Value {
  if (type === T_STRING) {
    if (keep) return c.string(key);
    c.skip(c.u64(`${key} length`), key);
    return null;
  }
  if (type === T_ARRAY) {
    const itemType = c.u32(`${key} item type`);
    const count = c.u64(`${key} count`);
    if (keep && itemType === T_INT32) {
      if (count * 4 > c.size - c.pos) throw new ModelFileError(`truncated GGUF header: ${key} runs past the end of the file`);
      const out = new Int32Array(count);
      for (let i = 0; i < count; i++) out[i] = c.i32(key);
      return out;
    }
    if (itemType === T_STRING) {
      for (let i = 0; i < count; i++) c.skip(c.u64(`${key}[${i}] length`), key);
    } else if (itemType === T_ARRAY || !(itemType < SCALAR_BYTES.length)) {
      throw new ModelFileError(`${key}: unsupported array item type ${itemType}`);
    } else {
      c.skip(count * SCALAR_BYTES[itemType], key);
    }
    return null;
  }
  const bytes = type < SCALAR_BYTES.length ? SCALAR_BYTES[type] : 0;
  if (bytes === 0) throw new ModelFileError(`${key}: unknown value type ${type}`);
  if (type === T_UINT16) return c.u16(key);
  if (type === T_UINT32) return c.u32(key);
  if (type === T_INT32) return c.i32(key);
  if (keep && type === T_FLOAT32) return c.f32(key);
  if (keep && type === T_FLOAT64) return c.f64(key);
  if (keep && (type === T_INT64 || type === T_UINT64)) return c.i64(key, type === T_UINT64);
  c.skip(bytes, key);
  return null;
}

const KEPT = new Set(['general.architecture', 'general.type', 'general.name', 'general.license', 'general.size_label', 'general.file_type', 'general.alignment',
  'tokenizer.ggml.token_type', 'split.no', 'split.count']);
const keep = (key: string) => KEPT.has(key) || key.endsWith('.context_length') || key.startsWith('general.sampling.');

// general.sampling.* key -> GgufSampling field (integers for top_k / penalty_last_n, finite numbers for the rest).
// general.sampling.* key -> GgufSampling field, integer or not, and Hugging Face's default of it (dropped, as vLLM).
const SAMPLING_KEYS: Array<[string, keyof GgufSampling, 'int' | 'float', number | null]> = [
  ['temp', 'temperature', 'float', 1], ['top_k', 'topK', 'int', 50], ['top_p', 'topP', 'float', 1],
  ['min_p', 'minP', 'float', null], ['penalty_repeat', 'repetitionPenalty', 'float', 1],
];

function samplingOf(num: (k: string) => number | null): GgufSampling {
  const out: GgufSampling = {};
  for (const [key, field, kind, hfDefault] of SAMPLING_KEYS) {
    const raw = num(`general.sampling.${key}`);
    if (raw === null || !Number.isFinite(raw) || (kind === 'int' && !Number.isInteger(raw))) continue;
    const v = kind === 'float' ? shortestF32(raw) : raw;
    if (v !== hfDefault) out[field] = v;
  }
  return out;
}

// The shortest decimal that is the same float32 (0.6 rather than 0.6000000238418579): what the converter wrote.
function shortestF32(v: number): number {
  for (let digits = 1; digits < 9; digits++) {
    const d = Number(v.toPrecision(digits));
    if (Math.fround(d) === v) return d;
  }
  return v;
}

function readHeader(c: Cursor, path: string): ModelFileInfo & { splitNo: number; splitCount: number } {
  if (c.size < 24 || c.u32('magic') !== 0x46554747) throw new ModelFileError('not a GGUF file (bad magic)');
  const version = c.u32('version');
  if (version < 2 || version > 3) throw new ModelFileError(`unsupported GGUF version ${version}`);
  const nTensors = c.u64('tensor count');
  const nKv = c.u64('metadata count');
  const kv = new Map<string, Value>();
  for (let i = 0; i < nKv; i++) {
    const key = c.string(`metadata key ${i}`);
    kv.set(key, readValue(c, c.u32(`${key} type`), key, keep(key)));
  }
  let nParams = 0;
  const tensors: TensorExtent[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = c.string(`tensor ${i} name`);
    const nDims = c.u32(`${name} n_dims`);
    if (nDims < 1 || nDims > 4) throw new ModelFileError(`tensor ${name} has ${nDims} dimensions`);
    let n = 1;
    for (let d = 0; d < nDims; d++) n *= c.u64(`${name} dimension ${d}`);
    c.skip(4, `${name} type`);
    tensors.push({ name, offset: c.u64(`${name} offset`), bytes: 0 });
    nParams += n;
    if (!Number.isSafeInteger(nParams)) throw new ModelFileError('parameter count overflows');
  }
  const str = (k: string) => (typeof kv.get(k) === 'string' ? (kv.get(k) as string) : null);
  const num = (k: string) => (typeof kv.get(k) === 'number' ? (kv.get(k) as number) : null);
  const arch = str('general.architecture') ?? 'unknown';
  const alignment = num('general.alignment') ?? 32;
  if (alignment < 1) throw new ModelFileError(`general.alignment is ${alignment}`);
  const dataStart = Math.ceil(c.pos / alignment) * alignment;
  const ftype = num('general.file_type');
  const tokenTypes = kv.get('tokenizer.ggml.token_type');
  const weightBytes = Math.max(0, c.size - dataStart);
  const byOffset = [...tensors].sort((a, b) => a.offset - b.offset);
  byOffset.forEach((t, i) => {
    t.bytes = Math.max(0, (i + 1 < byOffset.length ? byOffset[i + 1].offset : weightBytes) - t.offset);
  });
  return {
    path, fileBytes: c.size, files: [path], splitNo: num('split.no') ?? 0, splitCount: num('split.count') ?? 1, arch, type: str('general.type'), name: str('general.name'), license: str('general.license'), sizeLabel: str('general.size_label'),
    fileType: ftype, fileTypeName: ftype === null ? null : fileTypeName(ftype), nParams, nTensors,
    weightBytes, ctxTrain: num(`${arch}.context_length`),
    tokenTypes: tokenTypes instanceof Int32Array ? tokenTypes : null, tensors,
    expertCount: num(`${arch}.expert_count`), expertUsedCount: num(`${arch}.expert_used_count`),
    sampling: samplingOf(num),
  };
}

/**
 * Bytes of weights one decoded token must read (the decode floor is bandwidth / this): every tensor, except that
 * an untied token_embd (output.weight present) is only looked up by row, and stacked expert tensors (`*_exps`)
 * count for expert_used_count / expert_count of their bytes.
 */
export function decodeBytesPerToken(info: ModelFileInfo): number {
  const untied = info.tensors.some((t) => t.name === 'output.weight');
  const expertShare = info.expertCount && info.expertUsedCount ? info.expertUsedCount / info.expertCount : 1;
  let bytes = 0;
  for (const t of info.tensors) {
    if (untied && t.name === 'token_embd.weight') continue;
    bytes += /_exps\.weight$/.test(t.name) ? t.bytes * expertShare : t.bytes;
  }
  return bytes;
}

/**
 * Reads the header of the GGUF file at `path` (a split model's first file: every file's); throws ModelFileError
 * (missing file, not GGUF, truncated, a split file other than the first, a missing or foreign split file).
 */
export function readModelFileInfo(path: string): ModelFileInfo {
  const first = readOneFile(path);
  const files = splitSiblings(path, first.splitNo, first.splitCount);
  if (files.length === 1) return first;
  const out: ModelFileInfo = { ...first, files, tensors: [...first.tensors] };
  for (let k = 1; k < files.length; k++) {
    let part: ReturnType<typeof readOneFile>;
    try {
      part = readOneFile(files[k]);
    } catch (e) {
      throw new ModelFileError(`${files[k]}: ${(e as Error).message}`);
    }
    if (part.splitNo !== k || part.splitCount !== files.length) {
      throw new ModelFileError(`${files[k]}: split.no / split.count say ${part.splitNo + 1} of ${part.splitCount}, where its name says ${k + 1} of ${files.length}`);
    }
    out.fileBytes += part.fileBytes;
    out.nParams += part.nParams;
    out.nTensors += part.nTensors;
    out.weightBytes += part.weightBytes;
    out.tensors.push(...part.tensors);
  }
  return out;
}

function readOneFile(path: string): ModelFileInfo & { splitNo: number; splitCount: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ModelFileError(code === 'ENOENT' ? 'no such file' : `cannot open (${code ?? (e as Error).message})`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new ModelFileError('not a regular file');
    return readHeader(new Cursor(fd, st.size), path);
  } finally {
    closeSync(fd);
  }
}
